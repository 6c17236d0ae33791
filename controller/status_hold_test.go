package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/decide"
	"github.com/inplace-dev/inplace/controller/internal/testutil"
)

// The reconciler's side of the counters hold: a change of counters alone
// while the group recovers waits from the first change held, is requeued
// at what is left of the hold, and is written once it has run out; the
// hold's start is forgotten when nothing is to be written, and a JobSet
// recreated under the same name does not inherit it.
func TestWriteStatusNowHoldsCountersWhileTheGroupRecovers(t *testing.T) {
	js := testutil.InPlaceJobSet(1, 2)
	synced := testutil.T0
	js.Status.InPlaceRestarts, js.Status.Restarts = 1, 1
	meta.SetStatusCondition(&js.Status.Conditions, metav1.Condition{
		Type: string(jobset.JobSetRestarting), Status: metav1.ConditionFalse,
		Reason: decide.ReasonInPlaceRestartDone, Message: "synced", LastTransitionTime: synced,
	})
	js.Status.ReplicatedJobsStatus = []jobset.ReplicatedJobStatus{{Name: "driver", Ready: 1}, {Name: "workers", Ready: 1}}
	key := types.NamespacedName{Namespace: js.Namespace, Name: js.Name}
	// next has the workers' Job unready (or, with ready, every Job ready
	// again): a change of counters alone.
	plan := func(workersReady int32) *decide.Plan {
		p := &decide.Plan{Status: *js.Status.DeepCopy()}
		p.Status.ReplicatedJobsStatus[1].Ready = workersReady
		return p
	}
	r := &Reconciler{}
	start := synced.Add(time.Second)

	p := plan(0)
	if r.writeStatusNow(key, js, js.Status, p, start) {
		t.Fatal("the first change of counters alone while the group recovers: written at once")
	}
	if p.RequeueAfter != decide.RecoveryHold {
		t.Errorf("requeued after %v, want the whole hold, %v", p.RequeueAfter, decide.RecoveryHold)
	}

	// A later change waits only for what is left of the hold begun first.
	p = plan(0)
	p.Status.ReplicatedJobsStatus[0].Ready = 0
	if r.writeStatusNow(key, js, js.Status, p, start.Add(10*time.Second)) {
		t.Fatal("a second change 10 s into the hold: written")
	}
	if want := decide.RecoveryHold - 10*time.Second; p.RequeueAfter != want {
		t.Errorf("requeued after %v, want what is left of the hold, %v", p.RequeueAfter, want)
	}

	// A JobSet recreated under the same name starts a hold of its own.
	again := js.DeepCopy()
	again.UID = "uid-2"
	p = plan(0)
	if r.writeStatusNow(key, again, again.Status, p, start.Add(20*time.Second)) || p.RequeueAfter != decide.RecoveryHold {
		t.Errorf("a recreated JobSet: requeued after %v, want a hold of its own, %v", p.RequeueAfter, decide.RecoveryHold)
	}
	r.countersHeld.Forget(key)

	// Once the hold has run out the change is written.
	if r.writeStatusNow(key, js, js.Status, plan(0), start) {
		t.Fatal("a change after the hold was forgotten: written at once")
	}
	p = plan(0)
	if !r.writeStatusNow(key, js, js.Status, p, start.Add(decide.RecoveryHold)) {
		t.Error("a change held for the whole hold: not written")
	}
	if p.RequeueAfter != 0 {
		t.Errorf("a change written now: requeued after %v", p.RequeueAfter)
	}

	// Nothing to write forgets the hold: the next change waits afresh.
	if r.writeStatusNow(key, js, js.Status, &decide.Plan{Status: *js.Status.DeepCopy()}, start.Add(time.Minute)) {
		t.Error("nothing changed: written")
	}
	p = plan(0)
	if r.writeStatusNow(key, js, js.Status, p, start.Add(2*time.Minute)) || p.RequeueAfter != decide.RecoveryHold {
		t.Errorf("a change after nothing was to be written: requeued after %v, want a new hold, %v", p.RequeueAfter, decide.RecoveryHold)
	}

	// Every Job ready again is written at once, hold or not.
	unready := plan(0).Status
	if !r.writeStatusNow(key, js, unready, plan(1), start.Add(2*time.Minute+time.Second)) {
		t.Error("every Job ready again: held")
	}
}
