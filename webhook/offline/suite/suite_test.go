package suite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPassingSuite(t *testing.T) {
	res, err := Run(context.Background(), "testdata/queue")
	if err != nil {
		t.Fatal(err)
	}
	if res.Policy != "queue" || len(res.Cases) != 6 {
		t.Fatalf("policy %q, %d cases, want queue and 6", res.Policy, len(res.Cases))
	}
	for _, c := range res.Cases {
		if !c.Passed {
			t.Errorf("%s: failed: %s", c.Name, c.Why)
		}
	}
	if why := res.Cases[3].Why; !strings.Contains(why, "match or exclude leaves the request out") {
		t.Errorf("an excluded user's case says %q, want that exclude left it out", why)
	}
}

func TestFailingCasesAreReported(t *testing.T) {
	res, err := Run(context.Background(), "testdata/failing/suite.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Passed bool
		Got    Expect
		Why    string
	}
	var got []outcome
	for _, c := range res.Cases {
		got = append(got, outcome{c.Passed, c.Got, c.Why})
	}
	want := []outcome{
		{false, ExpectDeny, `got deny: "no queue: set the label kueue.x-k8s.io/queue-name", want allow`},
		{false, ExpectDeny, `no message contains "a message no rule says"; got deny: "no queue: set the label kueue.x-k8s.io/queue-name"`},
		{true, ExpectAllow, "allow"},
		{false, "", `parameters: spec.parameters do not match spec.parametersSchema: spec.parameters.label: Invalid value: "number": label in body must be of type string: "number"`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cases (-want +got):\n%s", diff)
	}
	if res.Failed() != 3 {
		t.Errorf("Failed() = %d, want 3", res.Failed())
	}
}

// write puts files into a new directory, the suite file first.
func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBadSuitesAreRefused(t *testing.T) {
	abs := func(p string) string {
		a, err := filepath.Abs(filepath.Join("testdata/queue", p))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	header := "apiVersion: policy.inplace.dev/v1alpha1\nkind: PolicySuite\npolicy: " + abs("policy.yaml") + "\n"
	aCase := "- name: a\n  object: " + abs("cases/no-queue.yaml") + "\n  expect: deny\n"
	badPolicy, err := os.ReadFile(abs("policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		files map[string]string
		want  []string
	}{
		"an unknown field": {
			files: map[string]string{"suite.yaml": header + "cases:\n- name: a\n  object: " + abs("cases/no-queue.yaml") + "\n  expcet: deny\n"},
			want:  []string{"suite.yaml", `unknown field "expcet"`},
		},
		"a wrong expect": {
			files: map[string]string{"suite.yaml": header + "cases:\n- name: a\n  object: " + abs("cases/no-queue.yaml") + "\n  expect: denied\n"},
			want:  []string{"suite.yaml", `cases[0].expect: "denied" is not deny, warn or allow`},
		},
		"no expect": {
			files: map[string]string{"suite.yaml": header + "cases:\n- name: a\n  object: " + abs("cases/no-queue.yaml") + "\n"},
			want:  []string{"suite.yaml", "cases[0].expect: required"},
		},
		"a missing object": {
			files: map[string]string{"suite.yaml": header + "cases:\n- name: a\n  object: cases/gone.yaml\n  expect: deny\n"},
			want:  []string{"suite.yaml", "cases[0].object:", "gone.yaml", "no such file"},
		},
		"a missing inventory file": {
			files: map[string]string{"suite.yaml": header + "inventory: [gone.yaml]\ncases:\n" + aCase},
			want:  []string{"suite.yaml", "inventory[0]:", "gone.yaml"},
		},
		"UPDATE without oldObject": {
			files: map[string]string{"suite.yaml": header + "cases:\n" + aCase + "  operation: UPDATE\n"},
			want:  []string{"cases[0].oldObject: required with operation UPDATE"},
		},
		"the wrong kind": {
			files: map[string]string{"suite.yaml": strings.Replace(header, "PolicySuite", "Suite", 1) + "cases:\n" + aCase},
			want:  []string{`kind: "Suite", want PolicySuite`},
		},
		"no cases": {
			files: map[string]string{"suite.yaml": header},
			want:  []string{"cases: required"},
		},
		"two cases of one name": {
			files: map[string]string{"suite.yaml": header + "cases:\n" + aCase + aCase},
			want:  []string{`cases[1].name: "a" names an earlier case too`},
		},
		"a JobSet with an unknown field": {
			files: map[string]string{
				"suite.yaml": header + "cases:\n- name: a\n  object: js.yaml\n  expect: deny\n",
				"js.yaml":    "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: x}\nspec:\n  replicatedJob: []\n",
			},
			want: []string{"cases[0].object:", "js.yaml", `unknown field "replicatedJob"`},
		},
		"parameters that break the schema": {
			files: map[string]string{
				"suite.yaml":  "apiVersion: policy.inplace.dev/v1alpha1\nkind: PolicySuite\npolicy: policy.yaml\ncases:\n" + aCase,
				"policy.yaml": strings.Replace(string(badPolicy), "  parametersSchema:", "  parameters: {lable: x}\n  parametersSchema:", 1),
			},
			want: []string{"suite.yaml: policy queue:", "spec.parameters.lable", "unknown field"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := write(t, tc.files)
			_, err := Run(context.Background(), dir)
			if err == nil {
				t.Fatalf("no error, want one containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestFind(t *testing.T) {
	got, err := Find("testdata")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"testdata/failing/suite.yaml", "testdata/queue/suite.yaml"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Find (-want +got):\n%s", diff)
	}
}
