package library

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/inplace-dev/inplace/policies/jobsetpolicy"
	"github.com/inplace-dev/inplace/webhook/offline/suite"
)

// documented are the policies docs/reference/policy-library.md lists.
var documented = []string{
	"allowed-registries",
	"container-limits",
	"inplace-restart-above-n-pods",
	"kueue-queue-label",
	"local-queue-in-namespace",
	"max-jobsets-per-team",
	"max-pods-per-jobset",
	"max-restarts-by-tier",
	"no-hostpath-or-privileged",
	"priority-class",
	"trainer-restart-in-place",
}

func policyDirs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}

// TestSuites runs every policy's suite: each case must get the outcome
// and the messages it expects.
func TestSuites(t *testing.T) {
	for _, dir := range policyDirs(t) {
		t.Run(dir, func(t *testing.T) {
			res, err := suite.Run(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if res.Policy != dir {
				t.Errorf("the policy is named %q, want its directory's name %q", res.Policy, dir)
			}
			got := map[suite.Expect]bool{}
			for _, c := range res.Cases {
				got[c.Got] = true
				if !c.Passed {
					t.Errorf("%s: %s", c.Name, c.Why)
				}
			}
			switch {
			case !refuses(t, dir):
				if !got[suite.ExpectAllow] {
					t.Errorf("the suite has no allow case: a policy with no deny or violation rule is shown to admit (what it patches is tested in Go)")
				}
			case !got[suite.ExpectDeny] || !got[suite.ExpectAllow]:
				t.Errorf("the suite has no deny or no allow case: every policy is shown to refuse and to admit")
			}
		})
	}
}

// TestLayout checks that every directory is a policy: a manifest with a
// comment header, every parameter typed and described, and a suite; and
// that the documented policies are all there.
func TestLayout(t *testing.T) {
	dirs := policyDirs(t)
	for _, name := range documented {
		if !slices.Contains(dirs, name) {
			t.Errorf("%s: documented in docs/reference/policy-library.md, but there is no such directory", name)
		}
	}
	doc, err := os.ReadFile("../../docs/reference/policy-library.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		for _, f := range []string{"policy.yaml", suite.FileName} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("%s: %v: every policy of the library has policy.yaml and suite.yaml", dir, err)
			}
		}
		if !strings.Contains(string(doc), "`"+dir+"`") {
			t.Errorf("%s: docs/reference/policy-library.md does not list it", dir)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "policy.yaml"))
		if err != nil {
			continue
		}
		if !strings.HasPrefix(string(raw), "# "+dir+": ") {
			t.Errorf("%s/policy.yaml: does not begin with a comment header \"# %s: what it enforces\"", dir, dir)
		}
		p, err := suite.ReadPolicy(filepath.Join(dir, "policy.yaml"))
		if err != nil {
			t.Error(err)
			continue
		}
		if p.Spec.ParametersSchema == nil || p.Spec.Parameters == nil {
			t.Errorf("%s: no parametersSchema or no parameters", dir)
			continue
		}
		var schema map[string]any
		if err := json.Unmarshal(p.Spec.ParametersSchema.Raw, &schema); err != nil {
			t.Fatal(err)
		}
		for _, field := range undescribed("parameters", schema) {
			t.Errorf("%s: %s has no description", dir, field)
		}
	}
}

// undescribed lists the fields under a schema without a description.
func undescribed(path string, schema map[string]any) []string {
	var out []string
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		child, _ := p.(map[string]any)
		if d, _ := child["description"].(string); d == "" {
			out = append(out, path+"."+name)
		}
		out = append(out, undescribed(path+"."+name, child)...)
		if items, ok := child["items"].(map[string]any); ok {
			out = append(out, undescribed(path+"."+name+"[]", items)...)
		}
	}
	return out
}

// refuses says whether the policy of dir has a rule that can refuse a
// JobSet (deny or violation): a policy with none, which only patches,
// has a suite that can only admit.
func refuses(t *testing.T, dir string) bool {
	t.Helper()
	p, err := suite.ReadPolicy(filepath.Join(dir, "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := jobsetpolicy.Compile(p.Name, &p.Spec, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return compiled.CanRefuse()
}
