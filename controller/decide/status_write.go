package decide

import (
	"k8s.io/apimachinery/pkg/api/equality"

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
