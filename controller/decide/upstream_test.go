package decide

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// upstreamPods are the four Pods of inPlaceJobSet as upstream's agents
// annotate them, at attempt; the one named exited has a worker that
// exited 1.
func upstreamPods(attempt, exited string) []corev1.Pod {
	pods := syncedPods("")
	for i := range pods {
		pods[i].Annotations = map[string]string{jobset.InPlaceRestartAttemptKey: attempt}
		if pods[i].Name == exited {
			pods[i].Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "trainer",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
		}
	}
	return pods
}

// A JobSet upstream JobSet restarted in place twice (attempt 2) goes on
// under inplace from where upstream left it: synced at the epoch its
// Pods' attempt stands for, its Jobs kept, and the two restarts counted
// towards maxRestarts (3), which leaves it one.
func TestUpstreamInPlaceRestartsCarryOver(t *testing.T) {
	js := inPlaceJobSet(0, 0)
	js.Status.PreviousInPlaceRestartAttempt, js.Status.CurrentInPlaceRestartAttempt = ptr.To[int32](1), ptr.To[int32](2)
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))

	p := decidePure(t, js, Observed{Jobs: jobs, Pods: upstreamPods("2", ""), ServiceExists: true}, at(0), time.Minute)
	s := p.Status
	if s.SyncedEpoch != 3 || s.DeprecatedEpoch != 2 || ptr.Deref(s.CurrentInPlaceRestartAttempt, -1) != 2 || ptr.Deref(s.PreviousInPlaceRestartAttempt, -1) != 1 {
		t.Errorf("epochs %d/%d, attempts %v/%v; want synced 3, deprecated 2, and upstream's attempts kept",
			s.SyncedEpoch, s.DeprecatedEpoch, s.CurrentInPlaceRestartAttempt, s.PreviousInPlaceRestartAttempt)
	}
	if s.Restarts != 2 || s.InPlaceRestarts != 2 || s.RestartsCountTowardsMax != 2 {
		t.Errorf("restarts %d, in place %d, counted %d; want upstream's two in-place restarts", s.Restarts, s.InPlaceRestarts, s.RestartsCountTowardsMax)
	}
	if !hasEvent(p.Events, ReasonUpstreamInPlaceAdopted, "counted the 2 in-place restart(s) it made: restarts 2, 2 of them in place, 2 towards maxRestarts (3)") {
		t.Errorf("no %s Event saying what was counted: %+v", ReasonUpstreamInPlaceAdopted, p.Events)
	}
	if len(p.Warnings) != 0 || len(p.CreateJobs)+len(p.DeleteJobs) != 0 || p.Broadcast["syncedEpoch"] != "3" {
		t.Errorf("warnings %v, create %v, delete %v, broadcast %v; want none, the Jobs kept, synced 3 broadcast",
			p.Warnings, names(p.CreateJobs), names(p.DeleteJobs), p.Broadcast)
	}

	// Carried once: the status is inplace's now.
	js.Status = p.Status
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: upstreamPods("2", ""), ServiceExists: true, Broadcast: p.Broadcast}, at(1), time.Minute)
	if p.Status.Restarts != 2 || hasEvent(p.Events, ReasonUpstreamInPlaceAdopted, "") {
		t.Errorf("carried again: restarts %d, events %+v", p.Status.Restarts, p.Events)
	}

	// A worker exits: the third restart, the last maxRestarts allows.
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: upstreamPods("2", "d"), ServiceExists: true, Broadcast: p.Broadcast}, at(2), time.Minute)
	if p.Status.InPlaceRestarts != 3 || p.Status.RestartsCountTowardsMax != 3 || p.Status.DeprecatedEpoch != 3 || jobset.Finished(&p.Status) {
		t.Fatalf("after a worker's exit: %+v", p.Status)
	}
	js.Status = p.Status
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: upstreamPods("3", ""), ServiceExists: true, Broadcast: p.Broadcast}, at(3), time.Minute)
	if p.Status.SyncedEpoch != 4 || ptr.Deref(p.Status.CurrentInPlaceRestartAttempt, -1) != 3 {
		t.Fatalf("after the restart: synced %d, attempt %v; want 4 and 3", p.Status.SyncedEpoch, p.Status.CurrentInPlaceRestartAttempt)
	}
	js.Status = p.Status
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: upstreamPods("3", "a"), ServiceExists: true, Broadcast: p.Broadcast}, at(4), time.Minute)
	if c := findCondition(&p.Status, jobset.JobSetFailed); c == nil || c.Reason != ReasonReachedMaxRestarts {
		t.Errorf("a fourth restart with maxRestarts 3, two of them upstream's: failed condition %+v", c)
	}
}

// A finished JobSet keeps its counts: only the epochs are carried, so
// that upstream's attempts, which inplace writes in step with them, stay.
func TestUpstreamFinishedJobSetKeepsItsCounts(t *testing.T) {
	js := inPlaceJobSet(0, 0)
	js.Status.CurrentInPlaceRestartAttempt = ptr.To[int32](2)
	js.Status.TerminalState = jobset.TerminalStateCompleted
	p := decidePure(t, js, Observed{ServiceExists: true}, at(0), time.Minute)
	if p.Status.Restarts != 0 || p.Status.SyncedEpoch != 3 || ptr.Deref(p.Status.CurrentInPlaceRestartAttempt, -1) != 2 || len(p.Events) != 0 {
		t.Errorf("restarts %d, synced %d, attempt %v, events %+v; want 0, 3, 2 and none", p.Status.Restarts, p.Status.SyncedEpoch, p.Status.CurrentInPlaceRestartAttempt, p.Events)
	}
}
