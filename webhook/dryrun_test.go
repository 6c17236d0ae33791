package webhook

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/policies"
)

// A DryRun policy's violation is recorded as an Event, except on a dry-run
// request: the webhook declares sideEffects NoneOnDryRun, and keeps to it.
func TestDryRunPolicyRecordsAnEventOnlyOutsideDryRun(t *testing.T) {
	engine, err := policies.NewEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policies.Compile(policies.Source{Name: "always", Rego: "package always\n\ndeny contains \"every JobSet\" if true\n", Action: policies.DryRun})
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

// A DryRun policy's messages go into one Event, related to the policy: the
// Event recorder would count Events of one JobSet and reason as a series
// and keep the first note only. A note is cut to what an Event may hold.
func TestDryRunEventPerPolicy(t *testing.T) {
	recorder := events.NewFakeRecorder(10)
	js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns"}}
	long := strings.Repeat("é", maxEventNote)
	recordDryRun(recorder, js, []policies.Violation{
		{Policy: "a", Message: "first"}, {Policy: "b", Message: long}, {Policy: "a", Message: "second"},
	})
	close(recorder.Events)
	var got []string
	for e := range recorder.Events {
		got = append(got, e)
	}
	if len(got) != 2 {
		t.Fatalf("events %q, want one per policy", got)
	}
	if want := "Warning PolicyViolationDryRun a: first; second"; got[0] != want {
		t.Errorf("event %q, want %q", got[0], want)
	}
	note := strings.TrimPrefix(got[1], "Warning PolicyViolationDryRun ")
	if len(note) > maxEventNote || !strings.HasSuffix(note, "... (cut)") || !utf8.ValidString(note) {
		t.Errorf("note of %d bytes, valid UTF-8 %v, ending %q: want at most %d, cut, valid", len(note), utf8.ValidString(note), note[len(note)-12:], maxEventNote)
	}
}
