package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/decide"
	"github.com/inplace-dev/inplace/controller/internal/testutil"
)

// A new InPlaceRestart JobSet's Jobs wait until its agents' grants name
// it, so that no agent's first watch is refused; for at most
// decide.AgentGrantWait, after which they are created with a Warning. The
// grants are read as observe reads them, decided on by decide.Decide and
// said as Reconcile says them.
func TestJobsWaitForTheAgentsGrants(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	js := testutil.InPlaceJobSet(0, 0)
	js.Namespace = "ns"
	js.CreationTimestamp = metav1.NewTime(now.Add(-time.Second))
	c := rbacClient(t, interceptor.Funcs{}, js)
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{client: c, recorder: recorder}
	// Every Job of the JobSet: one driver, one workers Job.
	const all = 2
	plan := func(js *jobset.JobSet) decide.Plan {
		t.Helper()
		var obs decide.Observed
		if err := r.observeAgentGrants(ctx, js, &obs); err != nil {
			t.Fatal(err)
		}
		p := decide.Decide(js, obs, metav1.NewTime(now), decide.Timeouts{InPlaceRestart: time.Minute})
		r.record(ctx, js, &p)
		return p
	}

	p := plan(js)
	if len(p.CreateJobs) != 0 || p.RequeueAfter != decide.AgentGrantWait-time.Second {
		t.Errorf("without grants: creates %d Jobs, requeues after %v; want none, after %v", len(p.CreateJobs), p.RequeueAfter, decide.AgentGrantWait-time.Second)
	}

	if err := syncAgentRBAC(ctx, c, js.Namespace); err != nil {
		t.Fatal(err)
	}
	p = plan(js)
	if len(p.CreateJobs) != all || p.RequeueAfter != 0 {
		t.Errorf("with grants: creates %d Jobs, requeues after %v; want the %d Jobs, no requeue", len(p.CreateJobs), p.RequeueAfter, all)
	}

	other := js.DeepCopy()
	other.Name = "other"
	other.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.ServiceAccountName = "trainer"
	other.CreationTimestamp = metav1.NewTime(now.Add(-decide.AgentGrantWait))
	p = plan(other)
	if len(p.CreateJobs) != all {
		t.Errorf("past %v without grants: creates %d Jobs, want them created", decide.AgentGrantWait, len(p.CreateJobs))
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
		{"created before the controller started", now.Add(-time.Hour), false, 0, decide.AgentGrantWait - time.Second},
		{"created ahead of the controller's clock", now.Add(time.Hour), false, 0, decide.AgentGrantWait},
		{"suspended", now, true, all, 0},
	} {
		js := other.DeepCopy()
		js.CreationTimestamp = metav1.NewTime(tc.created)
		js.Spec.Suspend = &tc.suspend
		p := plan(js)
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
