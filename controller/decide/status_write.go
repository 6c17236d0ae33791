package decide

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// NeedsWrite reports whether the status decided, next, must be written over
// the status read, cur, of js. A change of nothing but the replicated
// jobs' counters during an in-place restart is not written: the counters
// move with every Job's status, N times per restart of N Jobs, and the
// status write that ends the restart carries them, so the writes of a
// restart stay constant in N. (Outside a restart the event handlers'
// batching bounds how often they are written.)
//
// An in-place restart is the restart state's (Restarting), not the
// epochs': after a suspension deprecatedEpoch >= syncedEpoch holds too,
// and a suspended JobSet's counters (its Jobs suspended, their Pods gone)
// would wait for a sync that comes only after it is resumed.
func NeedsWrite(js *jobset.JobSet, cur, next jobset.JobSetStatus) bool {
	if equality.Semantic.DeepEqual(cur, next) {
		return false
	}
	return !jobset.RestartStateOf(js, &next).InPlaceRestarting() || !countersOnly(cur, next)
}

// countersOnly reports whether two statuses differ only in what the
// replicated jobs' Jobs report (ready, active, succeeded, failed,
// suspended). A Job's restart (jobRestarts) is a decision, not a count: its
// write is never held back.
func countersOnly(a, b jobset.JobSetStatus) bool {
	a.ReplicatedJobsStatus, b.ReplicatedJobsStatus = decisionsOf(a.ReplicatedJobsStatus), decisionsOf(b.ReplicatedJobsStatus)
	return equality.Semantic.DeepEqual(a, b)
}

// decisionsOf keeps of replicated jobs' statuses what the controller
// decided: their names and their Jobs' restarts.
func decisionsOf(statuses []jobset.ReplicatedJobStatus) []jobset.ReplicatedJobStatus {
	out := make([]jobset.ReplicatedJobStatus, 0, len(statuses))
	for _, s := range statuses {
		out = append(out, jobset.ReplicatedJobStatus{Name: s.Name, JobRestarts: s.JobRestarts, JobRestartsCountTowardsMax: s.JobRestartsCountTowardsMax})
	}
	return out
}

// RecoveryHold bounds how long a change of counters alone waits while an
// in-place JobSet recovers from a restart (HoldCounters): written at most
// this often meanwhile.
const RecoveryHold = 30 * time.Second

// RecoveryWindow is how long after an in-place restart completed (synced)
// its group counts as recovering, ready again or not: a Job unready
// later than that is news, written as it comes.
const RecoveryWindow = 10 * time.Minute

// HoldCounters reports whether next, which NeedsWrite would write over
// cur, changes nothing but counters while js recovers from the in-place
// restart that completed last: synced again (RestartingJobSet False,
// InPlaceRestartCompleted) less than RecoveryWindow before now, but some
// replicated job not yet ready again. In container scope every Pod of the
// group goes unready and ready again after the release, as its kubelet
// restarts its containers, and each Job's readiness moves the counters:
// written at each, they would cost a status write per batch period for
// the tens of seconds the kubelets take, more the larger N. Held, they are
// written once the group is ready again, with the next decision, or
// RecoveryHold after the first change held (CountersWait; the reconciler
// keeps that time), whichever comes first.
//
// Only after an in-place restart: at a first start, a resume or a
// recreation (a fallback from in place included), the counters say how
// far the start has come, and are written as they move.
func HoldCounters(js *jobset.JobSet, cur, next jobset.JobSetStatus, now time.Time) bool {
	if !jobset.InPlaceActive(js) || jobset.RestartStateOf(js, &next) != jobset.StateRunning {
		return false
	}
	c := meta.FindStatusCondition(next.Conditions, string(jobset.JobSetRestarting))
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonInPlaceRestartDone || now.Sub(c.LastTransitionTime.Time) >= RecoveryWindow {
		return false
	}
	return countersOnly(cur, next) && !everyJobReady(js, next)
}

// CountersWait is how much longer counters held since heldSince may wait
// at now: what is left of RecoveryHold; 0 to write them now.
func CountersWait(heldSince, now time.Time) time.Duration {
	return max(0, RecoveryHold-now.Sub(heldSince))
}

// everyJobReady reports whether every Job of every replicated job is ready
// or has succeeded, as status counts them.
func everyJobReady(js *jobset.JobSet, status jobset.JobSetStatus) bool {
	for _, rj := range js.Spec.ReplicatedJobs {
		i := slices.IndexFunc(status.ReplicatedJobsStatus, func(s jobset.ReplicatedJobStatus) bool { return s.Name == rj.Name })
		if i < 0 {
			return false
		}
		if s := status.ReplicatedJobsStatus[i]; s.Ready+s.Succeeded < rj.Replicas {
			return false
		}
	}
	return true
}
