package webhook

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/webhook/inject"
)

func specManifest(t *testing.T, file string) *jobset.JobSet {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "test", "testdata", "specs", file))
	if err != nil {
		t.Fatal(err)
	}
	var js jobset.JobSet
	if err := yaml.UnmarshalStrict(data, &js); err != nil {
		t.Fatal(err)
	}
	return &js
}

// An update that sends the manifest as written (kubectl replace) gets back
// exactly what was stored on create, even when the manager's agent
// configuration changed meanwhile; nothing is rendered anew.
func TestRestoreGivesBackWhatCreateAdded(t *testing.T) {
	for _, file := range []string{"inplace-story1.yaml", "inplace-story2.yaml", "failurepolicy-story4.yaml", "startup-story2.yaml"} {
		t.Run(file, func(t *testing.T) {
			manifest := specManifest(t, file)
			for i := range manifest.Spec.ReplicatedJobs {
				// as a user writes it: no agent, injection adds it
				manifest.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.InitContainers = nil
			}
			stored := storedOnCreate(t, manifest)

			// stored by an earlier manager, with another agent image and
			// container name
			for i := range stored.Spec.ReplicatedJobs {
				for j := range stored.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.InitContainers {
					agent := &stored.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.InitContainers[j]
					agent.Image, agent.Name = "registry.example/agent:older", "agent-of-old"
				}
			}

			replaced := manifest.DeepCopy()
			delete(replaced.Annotations, inject.InjectedAnnotation)
			Restore(replaced, stored)
			if diff := cmp.Diff(stored.Spec, replaced.Spec); diff != "" {
				t.Errorf("restored spec differs from the stored one (-stored +restored):\n%s", diff)
			}
			if diff := cmp.Diff(stored.Annotations, replaced.Annotations); diff != "" {
				t.Errorf("restored annotations (-stored +restored):\n%s", diff)
			}

			again := replaced.DeepCopy()
			Restore(again, stored)
			if diff := cmp.Diff(replaced, again); diff != "" {
				t.Errorf("Restore is not idempotent (-once +twice):\n%s", diff)
			}
		})
	}
}

// What the client did send wins, and nothing the stored JobSet lacks is
// added: a JobSet stored without defaults gets none on update.
func TestRestoreAddsNothingNew(t *testing.T) {
	stored := specManifest(t, "failurepolicy-story2.yaml")
	update := stored.DeepCopy()
	update.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "b"}
	Restore(update, stored)
	if update.Spec.SuccessPolicy != nil || update.Spec.Network != nil || update.Spec.ReplicatedJobs[0].Template.Spec.CompletionMode != nil {
		t.Errorf("Restore defaulted fields the stored JobSet lacks: %+v", update.Spec)
	}
	if got := update.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector["pool"]; got != "b" {
		t.Errorf("Restore overwrote what the request sent: nodeSelector pool=%q", got)
	}
}

// A replace that scales an InPlaceRestart replicated job and leaves out the
// completions injection set keeps them equal to the new parallelism: the
// stored number would undo the scale.
func TestRestoreKeepsAScale(t *testing.T) {
	manifest := specManifest(t, "inplace-story1.yaml")
	for i := range manifest.Spec.ReplicatedJobs {
		manifest.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.InitContainers = nil
		manifest.Spec.ReplicatedJobs[i].Template.Spec.Completions = nil
	}
	stored := storedOnCreate(t, manifest)
	scaled := manifest.DeepCopy()
	job := &scaled.Spec.ReplicatedJobs[0].Template.Spec
	want := *job.Parallelism + 2
	job.Parallelism = &want
	Restore(scaled, stored)
	if got := job.Completions; got == nil || *got != want {
		t.Errorf("completions restored as %v, want the scaled parallelism %d", got, want)
	}
	if got := *scaled.Spec.ReplicatedJobs[0].Template.Spec.Parallelism; got != want {
		t.Errorf("parallelism restored as %d, want %d as sent", got, want)
	}
}

// storedOnCreate is the JobSet the mutating webhook stores for manifest on
// CREATE, with the default configuration and the built-in policies.
func storedOnCreate(t *testing.T, manifest *jobset.JobSet) *jobset.JobSet {
	t.Helper()
	engine, err := policies.NewEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &configv1alpha1.Configuration{}
	configv1alpha1.SetDefaults(cfg)
	mutated, err := Pipeline{Agent: cfg.Agent, Engine: engine}.Mutate(context.Background(), manifest.DeepCopy(), policies.Input{})
	raw := mutated.JSON
	if err != nil {
		t.Fatal(err)
	}
	stored, err := decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return stored
}
