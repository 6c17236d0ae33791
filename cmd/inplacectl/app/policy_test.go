package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const suites = "../../../webhook/offline/suite/testdata"

func TestPolicyTestRunsSuites(t *testing.T) {
	code, out, errOut := run(t, "policy", "test", filepath.Join(suites, "queue"))
	if code != 0 || !strings.Contains(out, "6 passed, 0 failed") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	want := "PASS " + filepath.Join(suites, "queue") + `: a JobSet without a queue label is denied (deny: "no queue: set the label kueue.x-k8s.io/queue-name")`
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}

	code, out, _ = run(t, "policy", "test", suites)
	for _, want := range []string{
		"FAIL " + filepath.Join(suites, "failing") + ": wrong outcome (got deny: ",
		"PASS " + filepath.Join(suites, "failing") + ": right (allow)",
		"7 passed, 3 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("exit %d with failing cases, want 1", code)
	}
}

func TestPolicyTestRunsRegoTestsAndSuitesTogether(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte("package p\n\ndeny contains \"no\" if input.x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p_test.rego"), []byte("package p_test\n\nimport data.p\n\ntest_x_denied if {\n\tcount(p.deny) == 1 with input as {\"x\": true}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "queue")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(filepath.Join(suites, "queue"))
	if err != nil {
		t.Fatal(err)
	}
	s := "apiVersion: policy.inplace.dev/v1alpha1\nkind: PolicySuite\npolicy: " + filepath.Join(abs, "policy.yaml") + "\ncases:\n- name: denied\n  object: " + filepath.Join(abs, "cases/no-queue.yaml") + "\n  expect: deny\n"
	if err := os.WriteFile(filepath.Join(sub, "suite.yaml"), []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "policy", "test", dir)
	if code != 0 || !strings.Contains(out, "PASS p_test.test_x_denied") || !strings.Contains(out, "PASS "+sub+": denied (deny: ") || !strings.Contains(out, "2 passed, 0 failed") {
		t.Errorf("exit %d: %s%s", code, out, errOut)
	}

	if err := os.WriteFile(filepath.Join(sub, "suite.yaml"), []byte(strings.Replace(s, "expect: deny", "expect: denied", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, "policy", "test", dir)
	if code != 1 || !strings.Contains(out, "FAIL "+sub+`: the suite did not run: `) || !strings.Contains(out, `cases[0].expect: "denied" is not deny, warn or allow`) {
		t.Errorf("a bad suite: exit %d, output:\n%s", code, out)
	}

	code, _, errOut = run(t, "policy", "test", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "no .rego files and no suite.yaml under") {
		t.Errorf("an empty directory: exit %d, stderr %s", code, errOut)
	}
}

func TestPolicyDescribe(t *testing.T) {
	code, out, errOut := run(t, "policy", "describe", "-f", filepath.Join(suites, "queue/policy.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{
		"Name:               queue\n",
		"EnforcementAction:  Deny (default)\n",
		"Target:             JobSet (default)\n",
		"RegoVersion:        v1 (default)\n",
		"Match:              <none>: every JobSet, every request\n",
		"Exclude:\n  users:\n  - system:serviceaccount:ci:*\n",
		"ParametersSchema:\n  parameters\t<object> -required-\n    label\t<string> (default: \"kueue.x-k8s.io/queue-name\")\n      the label that names the queue\n",
		"Parameters: (valid, the schema's defaults applied)\n  label: kueue.x-k8s.io/queue-name\n",
		"Rego:               compiles\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
}

func TestPolicyDescribeInvalid(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(suites, "queue/policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), "  parametersSchema:", "  parameters: {lable: x, label: 3}\n  parametersSchema:", 1)
	bad = strings.Replace(bad, "not data.inventory", "not data.inventory[", 1)
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := run(t, "policy", "describe", "-f", path)
	for _, want := range []string{
		"Parameters:         invalid: the API server refuses this policy\n",
		"  spec.parameters.label: Invalid value:",
		"  spec.parameters.lable: Invalid value: \"lable\": unknown field: spec.parametersSchema names only label here\n",
		"Rego:               does not compile:\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if code, _, errOut := run(t, "policy", "describe"); code != 2 || !strings.Contains(errOut, `required flag(s) "filename" not set`) {
		t.Errorf("no -f: exit %d, stderr %s", code, errOut)
	}
}

func TestPolicyDescribeGatekeeperStyle(t *testing.T) {
	code, out, errOut := run(t, "policy", "describe", "-f", "../../../policies/library/allowed-registries/policy.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{
		"EnforcementAction:  Deny\n",
		"Target:             PodTemplates\n",
		"RegoVersion:        v0\n",
		"    registries\t<[]string> -required- (default: [\"ghcr.io/inplace-dev/\",\"registry.k8s.io/\"])\n",
		"  registries:\n  - ghcr.io/inplace-dev/\n",
		"Rego:               compiles\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
}
