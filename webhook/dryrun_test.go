package webhook

import (
	"context"
	"testing"

	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/inplace-dev/inplace/policies"
)

// A DryRun policy's violation is recorded as an Event, except on a dry-run
// request: the webhook declares sideEffects NoneOnDryRun, and keeps to it.
func TestDryRunPolicyRecordsAnEventOnlyOutsideDryRun(t *testing.T) {
	engine, err := policies.NewEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policies.Compile("always", "package always\n\ndeny contains \"every JobSet\" if true\n", policies.DryRun, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	engine.SetPolicy(p)
	raw := []byte(`{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","metadata":{"name":"js","namespace":"ns"},"spec":{"replicatedJobs":[{"name":"w","replicas":1,"template":{"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"i"}]}}}}}]}}`)

	for _, tc := range []struct {
		name       string
		dryRun     bool
		wantEvents int
	}{
		{"a real request", false, 1},
		{"a dry-run request", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recorder := events.NewFakeRecorder(10)
			v := NewValidator(Options{Engine: engine, Recorder: recorder})
			req := request(raw)
			req.DryRun = ptr.To(tc.dryRun)
			if resp := v.Handle(context.Background(), req); !resp.Allowed {
				t.Fatalf("a DryRun policy denied the request: %v", resp.Result)
			}
			if got := len(recorder.Events); got != tc.wantEvents {
				t.Errorf("%d Events recorded, want %d", got, tc.wantEvents)
			}
		})
	}
}
