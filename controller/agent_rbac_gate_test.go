package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/inplace-dev/inplace/controller/decide"
	"github.com/inplace-dev/inplace/controller/internal/testutil"
)

// A new InPlaceRestart JobSet's Jobs wait until its agents' grants name
// it, so that no agent's first watch is refused; for at most
// agentGrantWait, after which they are created with a Warning.
func TestJobsWaitForTheAgentsGrants(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	js := testutil.InPlaceJobSet(0, 0)
	js.Namespace = "ns"
	js.CreationTimestamp = metav1.NewTime(now.Add(-time.Second))
	c := rbacClient(t, interceptor.Funcs{}, js)
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{client: c, recorder: recorder}
	plan := func() *decide.Plan { return &decide.Plan{CreateJobs: []*batchv1.Job{{}}} }

	p := plan()
	if err := r.awaitAgentGrants(ctx, js, p, now); err != nil {
		t.Fatal(err)
	}
	if len(p.CreateJobs) != 0 || p.RequeueAfter != agentGrantWait-time.Second {
		t.Errorf("without grants: creates %d Jobs, requeues after %v; want none, after %v", len(p.CreateJobs), p.RequeueAfter, agentGrantWait-time.Second)
	}

	if err := syncAgentRBAC(ctx, c, js.Namespace); err != nil {
		t.Fatal(err)
	}
	p = plan()
	if err := r.awaitAgentGrants(ctx, js, p, now); err != nil {
		t.Fatal(err)
	}
	if len(p.CreateJobs) != 1 || p.RequeueAfter != 0 {
		t.Errorf("with grants: creates %d Jobs, requeues after %v; want the Job, no requeue", len(p.CreateJobs), p.RequeueAfter)
	}

	other := js.DeepCopy()
	other.Name = "other"
	other.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.ServiceAccountName = "trainer"
	other.CreationTimestamp = metav1.NewTime(now.Add(-agentGrantWait))
	p = plan()
	if err := r.awaitAgentGrants(ctx, other, p, now); err != nil {
		t.Fatal(err)
	}
	if len(p.CreateJobs) != 1 {
		t.Errorf("past %v without grants: creates %d Jobs, want them created", agentGrantWait, len(p.CreateJobs))
	}
	select {
	case e := <-recorder.Events:
		if !strings.Contains(e, decide.ReasonAgentGrantsMissing) {
			t.Errorf("event %q, want %s", e, decide.ReasonAgentGrantsMissing)
		}
	default:
		t.Errorf("no %s Event", decide.ReasonAgentGrantsMissing)
	}

	// Created while no controller ran, a JobSet waits from the
	// controller's start; one whose creation is ahead of the controller's
	// clock waits no longer than the bound; a suspended one's Jobs run no
	// Pod and wait for nothing.
	r.since = now.Add(-time.Second)
	for _, tc := range []struct {
		name      string
		created   time.Time
		suspend   bool
		wantJobs  int
		wantAfter time.Duration
	}{
		{"created before the controller started", now.Add(-time.Hour), false, 0, agentGrantWait - time.Second},
		{"created ahead of the controller's clock", now.Add(time.Hour), false, 0, agentGrantWait},
		{"suspended", now, true, 1, 0},
	} {
		js := other.DeepCopy()
		js.CreationTimestamp = metav1.NewTime(tc.created)
		js.Spec.Suspend = &tc.suspend
		p := plan()
		if err := r.awaitAgentGrants(ctx, js, p, now); err != nil {
			t.Fatal(err)
		}
		if len(p.CreateJobs) != tc.wantJobs || p.RequeueAfter != tc.wantAfter {
			t.Errorf("%s: creates %d Jobs, requeues after %v; want %d, %v", tc.name, len(p.CreateJobs), p.RequeueAfter, tc.wantJobs, tc.wantAfter)
		}
	}
	select {
	case e := <-recorder.Events:
		t.Errorf("event %q while waiting", e)
	default:
	}
}
