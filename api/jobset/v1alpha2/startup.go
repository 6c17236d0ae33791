package v1alpha2

import "slices"

// StartsInOrder reports whether js's replicated jobs start in order of
// readiness: startupPolicyOrder InOrder, or a replicated job with
// dependsOn. An InPlaceRestart JobSet's barriers then lift in that order,
// at its first start and after every in-place restart.
func StartsInOrder(js *JobSet) bool {
	return (js.Spec.StartupPolicy != nil && js.Spec.StartupPolicy.StartupPolicyOrder == InOrder) ||
		slices.ContainsFunc(js.Spec.ReplicatedJobs, func(rj ReplicatedJob) bool { return len(rj.DependsOn) > 0 })
}
