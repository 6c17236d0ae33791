package decide

import (
	"slices"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// successPolicyMet reports whether the success policy is met: with All,
// every Job of the target replicated Jobs succeeded; with Any, at least one
// did. No targets means every replicated Job.
func successPolicyMet(js *jobset.JobSet, statuses []jobset.ReplicatedJobStatus) bool {
	policy := js.Spec.SuccessPolicy
	if policy == nil {
		policy = &jobset.SuccessPolicy{Operator: jobset.OperatorAll}
	}
	targeted := func(name string) bool {
		return len(policy.TargetReplicatedJobs) == 0 || slices.Contains(policy.TargetReplicatedJobs, name)
	}
	anyTarget := false
	for _, rj := range js.Spec.ReplicatedJobs {
		if !targeted(rj.Name) {
			continue
		}
		anyTarget = true
		succeeded := statusOf(statuses, rj.Name).Succeeded
		switch policy.Operator {
		case jobset.OperatorAny:
			if succeeded > 0 {
				return true
			}
		default:
			if succeeded < rj.Replicas {
				return false
			}
		}
	}
	return anyTarget && policy.Operator != jobset.OperatorAny
}
