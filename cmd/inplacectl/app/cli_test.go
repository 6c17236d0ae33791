package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	code, out, errOut := run(t, "render", "-f", "../../../webhook/inject/testdata/minimal.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"#   agent workers: added sidecar inplace-agent",
		"#   worker-restart-rules workers/trainer: restart the Pod in place on any non-zero exit code",
		"# warn   inplace_restart: spec.replicatedJobs[0].template.spec.template.spec.serviceAccountName: the Pods run as the namespace's default service account",
		"# Verdict: accepted",
		"backoffLimit: 2147483647",
		"path: /barrier-is-lifted",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("render output lacks %q:\n%s", want, out)
		}
	}
}

func TestRenderDenied(t *testing.T) {
	bad := filepath.Join(writeTree(t, map[string]string{"bad.yaml": deniedByAPolicy(t)}), "bad.yaml")
	code, out, _ := run(t, "render", "-f", bad)
	if code != 1 || !strings.Contains(out, `# deny   pod_template: spec.replicatedJobs[0].template.spec.template.spec.containers[0].restartPolicyRules[0].action "RestartPod" is not a container restart action: use RestartAllContainers`) {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}

func TestPolicyTest(t *testing.T) {
	code, out, errOut := run(t, "policy", "test", "../../../examples/policies")
	if code != 0 || !strings.Contains(out, "7 passed, 0 failed") {
		t.Errorf("exit %d: %s%s", code, out, errOut)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte("package p\n\ndeny contains \"no\" if input.x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p_test.rego"), []byte("package p_test\n\nimport data.p\n\ntest_wrong if {\n\tcount(p.deny) == 0 with input as {\"x\": true}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, "policy", "test", dir)
	if code != 1 || !strings.Contains(out, "FAIL p_test.test_wrong") || !strings.Contains(out, "0 passed, 1 failed") {
		t.Errorf("a failing Rego test: exit %d, output:\n%s", code, out)
	}
}

func TestPolicyEval(t *testing.T) {
	dir := t.TempDir()
	params := filepath.Join(dir, "params.yaml")
	if err := os.WriteFile(params, []byte("limit: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "policy", "eval", "-p", "../../../examples/policies", "-f", "../../../examples/failure-policy/fail-fast-on-bugs.yaml", "--params", params)
	if code != 1 || !strings.Contains(out, "# deny   max_restarts: spec.failurePolicy.maxRestarts is 10, above this cluster's limit of 5") {
		t.Errorf("exit %d: %s%s", code, out, errOut)
	}
}

func TestUsage(t *testing.T) {
	if code, _, errOut := run(t, "render"); code != 2 || !strings.Contains(errOut, `required flag(s) "filename" not set`) {
		t.Errorf("render without -f: exit %d %s", code, errOut)
	}
	if code, _, _ := run(t, "frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d", code)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "inplacectl v") || !strings.Contains(out, "(commit ") {
		t.Errorf("exit %d, output %q", code, out)
	}
}

func TestRenderReadsEveryDocumentAndStandardInput(t *testing.T) {
	good := jobSetYAML("good")
	dir := writeTree(t, map[string]string{
		"two.yaml":       good + "---\n" + unknownFieldYAML("bad"),
		"empty.yaml":     "# nothing\n---\n",
		"two-again.yaml": good + "---\n" + good,
	})
	write := func(name string) string { return filepath.Join(dir, name) }
	policyDir := writeTree(t, map[string]string{"p.rego": "package p\n\ndeny contains \"x\" if false\n"})
	cases := map[string]struct {
		args     []string
		stdin    string
		wantCode int
		want     []string
	}{
		"two documents, one refused": {args: []string{"render", "-f", write("two.yaml")}, wantCode: 1,
			want: []string{"# Verdict: accepted", "---", `# Verdict: refused: JobSet in version "v1alpha2" cannot be handled as a JobSet: strict decoding error: unknown field "spec.replicatedJob"`}},
		"standard input": {args: []string{"render", "-f", "-"}, stdin: good, wantCode: 0, want: []string{"# Verdict: accepted", "name: good"}},
		"a ServiceAccount beside": {args: []string{"render", "-f", "-"}, stdin: serviceAccountYAML + "---\n" + good, wantCode: 0,
			want: []string{"# Skipped: v1 ServiceAccount train: render answers JobSets", "# Verdict: accepted"}},
		"no JobSet":                {args: []string{"render", "-f", "-"}, stdin: serviceAccountYAML, wantCode: 1, want: []string{"standard input: no JobSet in it"}},
		"an empty file":            {args: []string{"render", "-f", write("empty.yaml")}, wantCode: 1, want: []string{"empty.yaml: no object in it"}},
		"empty standard input":     {args: []string{"render", "-f", "-"}, stdin: "", wantCode: 1, want: []string{"standard input: no object in it"}},
		"policy eval, two JobSets": {args: []string{"policy", "eval", "-p", policyDir, "-f", write("two-again.yaml")}, wantCode: 1, want: []string{"2 objects: policy eval takes one JobSet"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runWith(t, NewCommand, tc.stdin, tc.args...)
			checkExit(t, code, tc.wantCode, out, errOut)
			for _, w := range tc.want {
				if !strings.Contains(out+errOut, w) {
					t.Errorf("output lacks %q; stdout:\n%s\nstderr:\n%s", w, out, errOut)
				}
			}
		})
	}
}

// The API server stores a JobSet whose container has no image, as
// upstream JobSet does, and then refuses its Jobs: render accepts it, as
// the API server does, and says so.
func TestRenderWarnsOfAContainerWithoutImage(t *testing.T) {
	manifest := jobSetOf("no-image",
		replicatedJobYAML("a", "containers: [{name: c, image: registry.example/c:1}]"),
		replicatedJobYAML("b", "initContainers: [{name: fetch}]", "containers: [{name: ok, image: registry.example/c:1}, {name: trainer}]"))
	cases := map[string]struct {
		args       []string
		wantStdout []string
		wantStderr []string
	}{
		"the default output": {args: []string{"render", "-f", "-"}, wantStdout: []string{
			`# warn   render: spec.replicatedJobs[1].template.spec.template.spec.initContainers[0].image: Required value: the API server stores the JobSet`,
			`but refuses every Job created from it (spec.template.spec.initContainers[0].image: Required value); give container "fetch" an image`,
			`# warn   render: spec.replicatedJobs[1].template.spec.template.spec.containers[1].image: Required value`,
			"# Verdict: accepted",
		}},
		"-o yaml": {args: []string{"render", "-f", "-", "-o", "yaml"},
			wantStdout: []string{"name: no-image"},
			wantStderr: []string{"spec.replicatedJobs[1].template.spec.template.spec.containers[1].image: Required value", "# Verdict: accepted"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runWith(t, NewCommand, manifest, tc.args...)
			if code != 0 {
				t.Errorf("exit %d, want 0 (the API server stores it); stderr:\n%s", code, errOut)
			}
			checkStreams(t, out, errOut, tc.wantStdout, tc.wantStderr)
			if n := strings.Count(out+errOut, "# warn   render:"); n != 2 {
				t.Errorf("%d warnings, want 2, one per container without an image:\n%s%s", n, out, errOut)
			}
		})
	}
}
