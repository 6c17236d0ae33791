package webhook

import (
	"bytes"
	"os"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// The validating webhook records an Event for a DryRun policy's violations
// (and skips it on dry-run requests): it has side effects, so it must say
// NoneOnDryRun; the mutating webhook has none and says None.
func TestShippedWebhooksDeclareTheirSideEffects(t *testing.T) {
	want := map[string]admissionregistrationv1.SideEffectClass{
		"mjobset.inplace.dev":       admissionregistrationv1.SideEffectClassNone,
		"vjobset.inplace.dev":       admissionregistrationv1.SideEffectClassNoneOnDryRun,
		"vjobsetpolicy.inplace.dev": admissionregistrationv1.SideEffectClassNone,
	}
	data, err := os.ReadFile("../config/webhook/manifests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	seen := map[string]bool{}
	for {
		var cfg struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Webhooks []admissionregistrationv1.ValidatingWebhook `json:"webhooks"`
		}
		if err := dec.Decode(&cfg); err != nil {
			break
		}
		for _, w := range cfg.Webhooks {
			seen[w.Name] = true
			if w.SideEffects == nil || *w.SideEffects != want[w.Name] {
				t.Errorf("%s %s: sideEffects %v, want %s", cfg.Kind, w.Name, w.SideEffects, want[w.Name])
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("config/webhook/manifests.yaml has no %s", name)
		}
	}
}
