package app

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderReadsFilenamesAsKubectl holds -f and -R to kubectl's reading:
// directories, subdirectories, Lists, and -f repeated.
func TestRenderReadsFilenamesAsKubectl(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"two/a.yaml":             jobSetYAML("first"),
		"two/b.json":             `{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "second"}, "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.example/c:1"}]}}}}}]}}`,
		"two/notes.txt":          "not a manifest: the builder passes over it\n",
		"two/sub/c.yml":          jobSetYAML("deeper"),
		"list/jobsets.yaml":      listOf(jobSetYAML("in-list-1"), jobSetYAML("in-list-2")),
		"mixed/list.yaml":        listOf(serviceAccountYAML, jobSetYAML("beside")),
		"onlysub/sub/d.yaml":     jobSetYAML("below"),
		"bad/a.yaml":             jobSetYAML("fine"),
		"bad/b.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x\n",
		"serviceaccount.yaml":    serviceAccountYAML,
		"unknown-field.yaml":     strings.Replace(jobSetYAML("unknown"), "spec:\n", "spec:\n  bogus: 1\n", 1),
		"listed-unknown.yaml":    listOf(strings.Replace(jobSetYAML("listed-unknown"), "spec:\n", "spec:\n  bogus: 1\n", 1)),
		"empty/sub/.placeholder": "",
	})
	in := func(p string) string { return filepath.Join(dir, p) }
	cases := []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
		// want are in the output (standard output, then standard
		// error), in this order; absent are not.
		want, absent []string
		// stdoutOnly: want and absent are of standard output alone.
		stdoutOnly bool
	}{
		{name: "a directory with two files", args: []string{"-f", in("two")}, wantCode: 0,
			want:   []string{"# Verdict: accepted", "name: first", "---", "# Verdict: accepted", "name: second"},
			absent: []string{"name: deeper", "not a manifest"}},
		{name: "-R reads the subdirectories", args: []string{"-f", in("two"), "-R"}, wantCode: 0,
			want: []string{"name: first", "name: second", "name: deeper"}},
		{name: "-f repeated, in order", args: []string{"-f", in("two/sub/c.yml"), "-f", in("two/a.yaml")}, wantCode: 0,
			want: []string{"name: deeper", "name: first"}},
		{name: "-f with commas, and standard input", args: []string{"-f", in("two/sub/c.yml") + ",-"}, stdin: jobSetYAML("piped"), wantCode: 0,
			want: []string{"name: deeper", "name: piped"}},
		{name: "a List of two JobSets", args: []string{"-f", in("list/jobsets.yaml")}, wantCode: 0,
			want: []string{"# Verdict: accepted", "name: in-list-1", "---", "# Verdict: accepted", "name: in-list-2"}},
		{name: "a List holding a non-JobSet", args: []string{"-f", in("mixed")}, wantCode: 0,
			want:   []string{"# Skipped: v1 ServiceAccount train: render answers JobSets", "# Verdict: accepted", "name: beside"},
			absent: []string{"kind: ServiceAccount"}},
		{name: "an unknown field reaches strict field validation", args: []string{"-f", in("unknown-field.yaml")}, wantCode: 1,
			want: []string{`# Verdict: refused: JobSet in version "v1alpha2" cannot be handled as a JobSet: strict decoding error: unknown field "spec.bogus"`}},
		{name: "an unknown field in a List's item too", args: []string{"-f", in("listed-unknown.yaml")}, wantCode: 1,
			want: []string{`strict decoding error: unknown field "spec.bogus"`}},
		{name: "an empty directory", args: []string{"-f", in("empty")}, wantCode: 1,
			want: []string{in("empty") + ": no object in it: give a JobSet manifest"}},
		{name: "a directory whose manifests are in subdirectories", args: []string{"-f", in("onlysub")}, wantCode: 1,
			want: []string{in("onlysub") + ": no object in it (the subdirectories of " + in("onlysub") + " hold some: -R reads them)"}},
		{name: "an empty directory beside a JobSet", args: []string{"-f", in("empty"), "-f", in("two/a.yaml")}, wantCode: 0,
			want: []string{"name: first"}},
		{name: "a bad file in a directory is named", args: []string{"-f", in("bad")}, wantCode: 1,
			want:   []string{"error parsing " + in("bad/b.yaml") + ": error converting YAML to JSON"},
			absent: []string{"# Verdict"}},
		{name: "objects, no JobSet", args: []string{"-f", in("serviceaccount.yaml"), "-f", in("empty")}, wantCode: 1,
			want: []string{"# Skipped: v1 ServiceAccount train", in("serviceaccount.yaml") + ", " + in("empty") + ": no JobSet in it"}},
		{name: "a path that is not there", args: []string{"-f", in("nothing.yaml")}, wantCode: 1,
			want: []string{"stat " + in("nothing.yaml") + ": no such file or directory"}},
		{name: "a URL", args: []string{"-f", "https://example.com/jobset.yaml"}, wantCode: 2,
			want: []string{"-f https://example.com/jobset.yaml: URLs are not read"}},
		{name: "standard input twice", args: []string{"-f", "-", "-f", "-"}, stdin: jobSetYAML("piped"), wantCode: 2,
			want: []string{"-f - is given twice"}},
		{name: "-o yaml prints the JobSets alone", args: []string{"-f", in("mixed"), "-f", in("list"), "-o", "yaml"}, wantCode: 0, stdoutOnly: true,
			want:   []string{"name: beside", "name: in-list-1", "name: in-list-2"},
			absent: []string{"ServiceAccount", "kind: List", "# Verdict"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runWith(t, NewCommand, tc.stdin, append([]string{"render"}, tc.args...)...)
			checkExit(t, code, tc.wantCode, out, errOut)
			all := out + errOut
			if tc.stdoutOnly {
				all = out
			}
			rest := all
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Errorf("output lacks %q, or not in order; stdout:\n%s\nstderr:\n%s", w, out, errOut)
					continue
				}
				rest = rest[i+len(w):]
			}
			for _, a := range tc.absent {
				if strings.Contains(all, a) {
					t.Errorf("output holds %q; stdout:\n%s\nstderr:\n%s", a, out, errOut)
				}
			}
		})
	}
}

// TestPolicyEvalReadsOneJobSet holds policy eval -f to render's reading,
// with one JobSet, read strictly.
func TestPolicyEvalReadsOneJobSet(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"policies/p.rego":     "package p\n\ndeny contains \"x\" if false\n",
		"one/a.yaml":          jobSetYAML("first"),
		"two/a.yaml":          jobSetYAML("first"),
		"two/b.yaml":          jobSetYAML("second"),
		"list-one.yaml":       listOf(jobSetYAML("listed")),
		"list-two.yaml":       listOf(jobSetYAML("listed"), serviceAccountYAML),
		"serviceaccount.yaml": serviceAccountYAML,
		"unknown.yaml":        strings.Replace(jobSetYAML("unknown"), "spec:\n", "spec:\n  bogus: 1\n", 1),
		"duplicate.yaml":      "---\n# the JobSet\n---\n" + strings.Replace(jobSetYAML("dup"), "spec:\n", "spec:\n  suspend: true\n  suspend: false\n", 1),
		"duplicate.json":      `{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "dup", "name": "again"}, "spec": {"replicatedJobs": []}}`,
	})
	in := func(p string) string { return filepath.Join(dir, p) }
	cases := []struct {
		name     string
		file     string
		stdin    string
		wantCode int
		want     string
	}{
		{name: "a directory of one JobSet", file: in("one"), want: "# Policies: no violations"},
		{name: "a List of one JobSet", file: in("list-one.yaml"), want: "# Policies: no violations"},
		{name: "standard input", file: "-", stdin: jobSetYAML("piped"), want: "# Policies: no violations"},
		{name: "a directory of two", file: in("two"), wantCode: 1, want: in("two") + ": 2 objects: policy eval takes one JobSet"},
		{name: "a List of two", file: in("list-two.yaml"), wantCode: 1, want: ": 2 objects: policy eval takes one JobSet"},
		{name: "not a JobSet", file: in("serviceaccount.yaml"), wantCode: 1, want: in("serviceaccount.yaml") + ": kind is ServiceAccount, want JobSet"},
		{name: "an unknown field", file: in("unknown.yaml"), wantCode: 1, want: `json: unknown field "bogus"`},
		{name: "a key given twice, YAML", file: in("duplicate.yaml"), wantCode: 1, want: in("duplicate.yaml") + `: error converting YAML to JSON: yaml: unmarshal errors:` + "\n" + `  line 9: key "suspend" already set in map`},
		{name: "a key given twice, standard input", file: "-", stdin: "apiVersion: v1\napiVersion: v1\n" + strings.TrimPrefix(jobSetYAML("dup"), "apiVersion: jobset.x-k8s.io/v1alpha2\n"), wantCode: 1, want: `standard input: error converting YAML to JSON: yaml: unmarshal errors:` + "\n" + `  line 2: key "apiVersion" already set in map`},
		{name: "a key given twice, JSON", file: in("duplicate.json"), wantCode: 1, want: in("duplicate.json") + `: json: duplicate field "metadata.name"`},
		{name: "an empty directory", file: t.TempDir(), wantCode: 1, want: ": no object in it: give a JobSet manifest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runWith(t, NewCommand, tc.stdin, "policy", "eval", "-p", in("policies"), "-f", tc.file)
			if code != tc.wantCode || !strings.Contains(out+errOut, tc.want) {
				t.Errorf("exit %d, want %d and %q; stdout:\n%s\nstderr:\n%s", code, tc.wantCode, tc.want, out, errOut)
			}
		})
	}
}

func TestDuplicateKeys(t *testing.T) {
	cases := []struct {
		name, data, want string
	}{
		{name: "none", data: "a: 1\nb: {c: 2}\n---\na: 1\n"},
		{name: "in the second document", data: "a: 1\n---\n\nb: 1\nc:\n  d: 1\n  d: 2\n", want: `line 7: key "d" already set in map`},
		{name: "after empty documents", data: "---\n---\n# only a comment\n---\na: 1\na: 2\n", want: `line 6: key "a" already set in map`},
		{name: "the same key in two documents", data: "a: 1\n---\na: 2\n"},
		{name: "JSON, none", data: `{"a": [{"b": 1}, {"b": 2}]} {"a": 1}`},
		{name: "JSON, in an array", data: `{"a": [{"b": 1}, {"b": 2, "b": 3}]}`, want: `json: duplicate field "a[1].b"`},
		{name: "JSON, in the second object", data: `{"a": 1}` + "\n" + `{"a": 1, "a": 2}`, want: `json: duplicate field "a"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := duplicateKeys([]byte(tc.data))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
