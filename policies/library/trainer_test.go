package library

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/jobsetpolicy"
	"github.com/inplace-dev/inplace/webhook/inject"
	"github.com/inplace-dev/inplace/webhook/offline"
	"github.com/inplace-dev/inplace/webhook/offline/suite"
)

// TestTrainerRestartInPlacePatches creates each case of
// trainer-restart-in-place as the API server would, through the mutating
// webhook's pipeline with the policy's patch rules applied, and checks
// what is stored: a TrainJob's JobSet restarts in place in the policy's
// scope, its agent injected; any other is left as written.
func TestTrainerRestartInPlacePatches(t *testing.T) {
	const dir = "trainer-restart-in-place"
	policy, err := suite.ReadPolicy(filepath.Join(dir, "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	builtins, err := policies.BuiltinNames()
	if err != nil {
		t.Fatal(err)
	}
	engine, err := policies.NewEngine(builtins)
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := jobsetpolicy.Admit(policy.Name, &policy.Spec, func(string) labels.Set { return nil }, engine)
	if err != nil {
		t.Fatal(err)
	}
	engine.SetPolicy(compiled)
	cfg, err := configv1alpha1.Load("")
	if err != nil {
		t.Fatal(err)
	}
	admitter, err := offline.NewAdmitter(cfg.Agent, engine)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file        string
		inPlace     bool
		maxRestarts int32
	}{
		{file: "trainjob.yaml", inPlace: true, maxRestarts: 5},
		{file: "trainjob-recreate.yaml", inPlace: true, maxRestarts: 3},
		{file: "trainjob-rules.yaml", inPlace: true, maxRestarts: 5},
		{file: "not-trainjob.yaml"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			manifest, err := os.ReadFile(filepath.Join(dir, "cases", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			res, err := admitter.Create(context.Background(), manifest, "default")
			if err != nil {
				t.Fatal(err)
			}
			if res.Refusal != "" {
				t.Fatalf("refused: %s", res.Refusal)
			}
			var js jobset.JobSet
			if err := json.Unmarshal(res.Stored, &js); err != nil {
				t.Fatal(err)
			}
			_, injected := js.Annotations[inject.InjectedAnnotation]
			if !tc.inPlace {
				if js.Spec.FailurePolicy != nil || js.Annotations[protocol.RestartScopeAnnotation] != "" || injected {
					t.Errorf("a JobSet no TrainJob owns was changed: failurePolicy %+v, annotations %v", js.Spec.FailurePolicy, js.Annotations)
				}
				return
			}
			fp := js.Spec.FailurePolicy
			if fp == nil || fp.RestartStrategy != jobset.InPlaceRestart || fp.MaxRestarts != tc.maxRestarts {
				t.Errorf("failurePolicy %+v, want InPlaceRestart with maxRestarts %d", fp, tc.maxRestarts)
			}
			if got := js.Annotations[protocol.RestartScopeAnnotation]; got != protocol.RestartScopeProcess {
				t.Errorf("restart scope %q, want %q", got, protocol.RestartScopeProcess)
			}
			if !injected {
				t.Errorf("the agent was not injected after the patch: annotations %v", js.Annotations)
			}
		})
	}
}
