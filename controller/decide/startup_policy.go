package decide

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// startupGate says, for each replicated Job in spec order, whether its Jobs
// may be created or resumed now:
//
//   - AnyOrder: all at once;
//   - InOrder: each once every Job of the previous one is ready (or has
//     succeeded);
//   - dependsOn: once the named replicated Job reached the required status.
func startupGate(js *jobset.JobSet, statuses []jobset.ReplicatedJobStatus) []bool {
	allowed := make([]bool, len(js.Spec.ReplicatedJobs))
	inOrder := js.Spec.StartupPolicy != nil && js.Spec.StartupPolicy.StartupPolicyOrder == jobset.InOrder
	for i, rj := range js.Spec.ReplicatedJobs {
		switch {
		case inOrder && i > 0:
			prev := js.Spec.ReplicatedJobs[i-1]
			allowed[i] = allowed[i-1] && started(prev, statusOf(statuses, prev.Name))
		case len(rj.DependsOn) > 0:
			allowed[i] = dependenciesMet(js, rj, statuses)
		default:
			allowed[i] = true
		}
	}
	return allowed
}

// started reports whether every Job of a replicated Job is ready or done.
func started(rj jobset.ReplicatedJob, s jobset.ReplicatedJobStatus) bool {
	return s.Ready+s.Succeeded >= rj.Replicas
}

// dependenciesMet reports whether every dependency of rj reached its status:
// Ready when ready, succeeded and failed Jobs cover the replicas, Complete
// when every Job succeeded.
func dependenciesMet(js *jobset.JobSet, rj jobset.ReplicatedJob, statuses []jobset.ReplicatedJobStatus) bool {
	for _, d := range rj.DependsOn {
		replicas := int32(jobset.ReplicasOf(js, d.Name))
		s := statusOf(statuses, d.Name)
		switch d.Status {
		case jobset.DependencyComplete:
			if s.Succeeded < replicas {
				return false
			}
		default:
			if s.Ready+s.Succeeded+s.Failed < replicas {
				return false
			}
		}
	}
	return true
}

// updateStartupConditions maintains StartupPolicyInProgress and
// StartupPolicyCompleted for InOrder: in progress (naming the replicated Job
// that is starting) until every replicated Job has started, then completed
// until the next restart or suspension resets it.
func updateStartupConditions(js *jobset.JobSet, status *jobset.JobSetStatus, now metav1.Time) {
	if js.Spec.StartupPolicy == nil || js.Spec.StartupPolicy.StartupPolicyOrder != jobset.InOrder {
		return
	}
	if conditionTrue(status, jobset.JobSetStartupPolicyCompleted) {
		return
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		if !started(rj, statusOf(status.ReplicatedJobsStatus, rj.Name)) {
			msg := fmt.Sprintf(messageInOrderInProgress, rj.Name)
			setCondition(status, jobset.JobSetStartupPolicyInProgress, metav1.ConditionTrue, ReasonInOrderInProgress, msg, now)
			setCondition(status, jobset.JobSetStartupPolicyCompleted, metav1.ConditionFalse, ReasonInOrderInProgress, msg, now)
			return
		}
	}
	setCondition(status, jobset.JobSetStartupPolicyInProgress, metav1.ConditionFalse, ReasonInOrderCompleted, MessageInOrderCompleted, now)
	setCondition(status, jobset.JobSetStartupPolicyCompleted, metav1.ConditionTrue, ReasonInOrderCompleted, MessageInOrderCompleted, now)
}

// resetStartup makes the startup order run again, after a restart or a
// suspension.
func resetStartup(status *jobset.JobSetStatus, now metav1.Time) {
	if conditionTrue(status, jobset.JobSetStartupPolicyCompleted) {
		setCondition(status, jobset.JobSetStartupPolicyCompleted, metav1.ConditionFalse, ReasonInOrderInProgress,
			"startup policy runs again", now)
	}
}

// endTransientConditions closes the conditions that describe work in
// progress once the JobSet has finished; RestartingJobSet, a row's, is
// closed by the finish's row (apply).
func endTransientConditions(status *jobset.JobSetStatus, now metav1.Time) {
	if conditionTrue(status, jobset.JobSetStartupPolicyInProgress) {
		setCondition(status, jobset.JobSetStartupPolicyInProgress, metav1.ConditionFalse, ReasonJobSetFinished, MessageJobSetFinished, now)
	}
	if conditionTrue(status, jobset.JobSetImagePullFailure) {
		setCondition(status, jobset.JobSetImagePullFailure, metav1.ConditionFalse, ReasonJobSetFinished, MessageJobSetFinished, now)
	}
}
