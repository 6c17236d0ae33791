package suite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/inplace-dev/inplace/webhook"
)

// TestRefusesWhatAdmissionRefuses runs suites whose policy the
// JobSetPolicy webhook refuses: each suite must fail to run, with the
// webhook's own refusal, parameters that break the schema among them.
func TestRefusesWhatAdmissionRefuses(t *testing.T) {
	policy, err := os.ReadFile("testdata/queue/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	object, err := filepath.Abs("testdata/queue/cases/no-queue.yaml")
	if err != nil {
		t.Fatal(err)
	}
	suiteYAML := "apiVersion: policy.inplace.dev/v1alpha1\nkind: PolicySuite\npolicy: policy.yaml\ncases:\n- name: a\n  object: " + object + "\n  expect: deny\n"
	for name, edit := range map[string][2]string{
		"parameters of the wrong type":         {"  parametersSchema:", "  parameters: {label: 3}\n  parametersSchema:"},
		"an unknown parameter":                 {"  parametersSchema:", "  parameters: {lable: x}\n  parametersSchema:"},
		"a schema whose root is not an object": {"    type: object\n    properties:", "    type: string\n    properties:"},
		"Rego that does not parse":             {"package queue", "package queue\n\n    deny contains msg if {"},
	} {
		t.Run(name, func(t *testing.T) {
			manifest := strings.Replace(string(policy), edit[0], edit[1], 1)
			refusal := admissionRefusal(t, manifest)
			if refusal == "" {
				t.Fatalf("the JobSetPolicy webhook admits the policy; the test needs one it refuses")
			}
			dir := write(t, map[string]string{"suite.yaml": suiteYAML, "policy.yaml": manifest})
			_, err := Run(context.Background(), dir)
			if err == nil {
				t.Fatalf("the suite ran a policy the JobSetPolicy webhook refuses with %q", refusal)
			}
			if !strings.HasSuffix(err.Error(), refusal) {
				t.Errorf("the suite says %q, the JobSetPolicy webhook %q", err, refusal)
			}
		})
	}
}

// admissionRefusal is the JobSetPolicy webhook's refusal of a policy
// created from manifest, or "" if it admits it.
func admissionRefusal(t *testing.T, manifest string) string {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	resp := webhook.NewPolicyValidator().Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
	}})
	if resp.Allowed {
		return ""
	}
	return resp.Result.Message
}
