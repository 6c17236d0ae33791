package controller

import (
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// replicatedJobsStatus counts the current Jobs of each replicated Job by
// state, keeping the individual restart counters of the previous status.
// previous must be the plan's own copy of the status read: a restart
// decided later in the reconcile increments those counters in place.
func replicatedJobsStatus(js *jobset.JobSet, previousStatus []jobset.ReplicatedJobStatus, c children) []jobset.ReplicatedJobStatus {
	previous := map[string]jobset.ReplicatedJobStatus{}
	for _, s := range previousStatus {
		previous[s.Name] = s
	}
	byName := map[string]*jobset.ReplicatedJobStatus{}
	out := make([]jobset.ReplicatedJobStatus, len(js.Spec.ReplicatedJobs))
	for i, rj := range js.Spec.ReplicatedJobs {
		out[i] = jobset.ReplicatedJobStatus{
			Name:                       rj.Name,
			JobRestarts:                previous[rj.Name].JobRestarts,
			JobRestartsCountTowardsMax: previous[rj.Name].JobRestartsCountTowardsMax,
		}
		byName[rj.Name] = &out[i]
	}
	for _, job := range c.current {
		s := byName[job.Labels[jobset.ReplicatedJobNameKey]]
		if s == nil {
			continue
		}
		switch {
		case jobFinished(job, batchv1.JobFailed):
			s.Failed++
		case jobFinished(job, batchv1.JobComplete):
			s.Succeeded++
		default:
			if ptr.Deref(job.Spec.Suspend, false) {
				s.Suspended++
			} else if job.Status.Active > 0 {
				s.Active++
			}
			if jobReady(job) {
				s.Ready++
			}
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

// finished reports whether the JobSet reached a terminal state.
func finished(status *jobset.JobSetStatus) bool {
	return status.TerminalState != "" || conditionTrue(status, jobset.JobSetCompleted) || conditionTrue(status, jobset.JobSetFailed)
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
