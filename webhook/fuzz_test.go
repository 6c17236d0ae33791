package webhook

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
)

func request(raw []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "fuzz", Name: "js", Namespace: "ns", Operation: admissionv1.Create,
		Object: runtime.RawExtension{Raw: raw},
	}}
}

// FuzzAdmission: no JobSet makes either handler panic, and the mutation is
// idempotent: mutating the mutated object patches nothing. The seed corpus
// (the specifications' manifests) runs in every `go test`.
func FuzzAdmission(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "test", "testdata", "specs", "*.yaml"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		raw, err := yaml.YAMLToJSON(data)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"spec":{"failurePolicy":{"restartStrategy":"InPlaceRestart"},"replicatedJobs":[{"name":"w","template":{"spec":{"podFailurePolicy":{"rules":[{"action":"FailJob","onExitCodes":{"operator":"NotIn","values":[1]}}]}}}}]}}`))

	engine, err := policies.NewEngine(nil)
	if err != nil {
		f.Fatal(err)
	}
	cfg := &configv1alpha1.Configuration{}
	configv1alpha1.SetDefaults(cfg)
	m := &Mutator{opts: Options{Agent: cfg.Agent, Engine: engine}}
	v := &Validator{opts: Options{Agent: cfg.Agent, Engine: engine}}

	f.Fuzz(func(t *testing.T, raw []byte) {
		ctx := context.Background()
		resp := m.Handle(ctx, request(raw))
		v.Handle(ctx, request(raw))
		if !resp.Allowed || len(resp.Patches) == 0 {
			return
		}
		ops, err := json.Marshal(resp.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatalf("the webhook returned an invalid patch: %v", err)
		}
		mutated, err := patch.Apply(raw)
		if err != nil {
			t.Fatalf("the webhook's patch does not apply to its input: %v", err)
		}
		again := m.Handle(ctx, request(mutated))
		if !again.Allowed {
			t.Fatalf("the mutated object is denied by the mutating webhook: %v", again.Result)
		}
		if len(again.Patches) != 0 {
			t.Errorf("mutation is not idempotent: second pass patches %v", again.Patches)
		}
		v.Handle(ctx, request(mutated))
	})
}
