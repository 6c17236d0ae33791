package decide

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/state"
)

// replicatedJobsStatus counts the current Jobs of each replicated Job by
// state, keeping the individual restart counters of the previous status.
// previous must be the plan's own copy of the status read: a restart
// decided later in the reconcile increments those counters in place.
func replicatedJobsStatus(js *jobset.JobSet, previousStatus []jobset.ReplicatedJobStatus, c state.Children) []jobset.ReplicatedJobStatus {
	previous := make(map[string]jobset.ReplicatedJobStatus, len(previousStatus))
	for _, s := range previousStatus {
		previous[s.Name] = s
	}
	out := make([]jobset.ReplicatedJobStatus, len(js.Spec.ReplicatedJobs))
	for i, rj := range js.Spec.ReplicatedJobs {
		counts := c.Counts(rj.Name)
		if slices.ContainsFunc(js.Spec.ReplicatedJobs[i+1:], func(o jobset.ReplicatedJob) bool { return o.Name == rj.Name }) {
			// A name used twice (admission refuses it): its Jobs are
			// counted under the last.
			counts = &state.JobCounts{}
		}
		out[i] = jobset.ReplicatedJobStatus{
			Name:                       rj.Name,
			JobRestarts:                previous[rj.Name].JobRestarts,
			JobRestartsCountTowardsMax: previous[rj.Name].JobRestartsCountTowardsMax,
			Ready:                      counts.Ready,
			Succeeded:                  counts.Succeeded,
			Failed:                     counts.Failed,
			Active:                     counts.Running,
			Suspended:                  counts.Suspended,
		}
	}
	return out
}

// statusOf returns the status of the named replicated Job.
func statusOf(statuses []jobset.ReplicatedJobStatus, name string) jobset.ReplicatedJobStatus {
	for _, s := range statuses {
		if s.Name == name {
			return s
		}
	}
	return jobset.ReplicatedJobStatus{Name: name}
}

// setCondition sets a condition with the transition time from the injected
// clock; it reports whether anything changed.
func setCondition(status *jobset.JobSetStatus, t jobset.JobSetConditionType, s metav1.ConditionStatus, reason, message string, now metav1.Time) bool {
	return meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: string(t), Status: s, Reason: reason, Message: message, LastTransitionTime: now,
	})
}

// conditionTrue reports whether the condition t is set and true.
func conditionTrue(status *jobset.JobSetStatus, t jobset.JobSetConditionType) bool {
	return meta.IsStatusConditionTrue(status.Conditions, string(t))
}

// countedRestarts is every restart that counts towards maxRestarts: whole
// JobSet restarts and individual Job restarts.
func countedRestarts(status *jobset.JobSetStatus) int32 {
	n := status.RestartsCountTowardsMax
	for _, s := range status.ReplicatedJobsStatus {
		for _, r := range s.JobRestartsCountTowardsMax {
			n += r
		}
	}
	return n
}
