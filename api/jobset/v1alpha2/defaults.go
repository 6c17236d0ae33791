package v1alpha2

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Default fills in the defaults upstream JobSet applies at admission. The
// mutating webhook stores them; the controller applies them again to its
// in-memory copy, so that a JobSet admitted without the webhook behaves the
// same. Default is idempotent.
func Default(js *JobSet) {
	spec := &js.Spec
	if spec.SuccessPolicy == nil {
		spec.SuccessPolicy = &SuccessPolicy{Operator: OperatorAll}
	}
	if spec.StartupPolicy == nil {
		spec.StartupPolicy = &StartupPolicy{StartupPolicyOrder: AnyOrder}
	}
	if spec.Network == nil {
		spec.Network = &Network{}
	}
	if spec.Network.EnableDNSHostnames == nil {
		spec.Network.EnableDNSHostnames = ptr.To(true)
	}
	if spec.Network.PublishNotReadyAddresses == nil {
		spec.Network.PublishNotReadyAddresses = ptr.To(true)
	}
	if spec.FailurePolicy != nil {
		if spec.FailurePolicy.RestartStrategy == "" {
			spec.FailurePolicy.RestartStrategy = Recreate
		}
		for i := range spec.FailurePolicy.Rules {
			if spec.FailurePolicy.Rules[i].Name == "" {
				spec.FailurePolicy.Rules[i].Name = DefaultRuleName(i)
			}
		}
	}
	for i := range spec.VolumeClaimPolicies {
		p := &spec.VolumeClaimPolicies[i]
		if p.RetentionPolicy == nil {
			p.RetentionPolicy = &VolumeRetentionPolicy{}
		}
		if p.RetentionPolicy.WhenDeleted == nil {
			p.RetentionPolicy.WhenDeleted = ptr.To(RetentionPolicyDelete)
		}
	}
	for i := range spec.ReplicatedJobs {
		rj := &spec.ReplicatedJobs[i]
		if rj.GroupName == "" {
			rj.GroupName = "default"
		}
		job := &rj.Template.Spec
		if job.CompletionMode == nil {
			// Indexed Jobs give each Pod a stable hostname
			// <job>-<index>, which the headless Service turns into a DNS name.
			job.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		}
		if job.Template.Spec.RestartPolicy == "" {
			job.Template.Spec.RestartPolicy = defaultPodRestartPolicy(js, job)
		}
	}
}

// defaultPodRestartPolicy is OnFailure, as upstream, except where only Never
// works: a Job with a podFailurePolicy requires it, and with InPlaceRestart a
// worker exit that no restart rule covers must fail the Pod.
func defaultPodRestartPolicy(js *JobSet, job *batchv1.JobSpec) corev1.RestartPolicy {
	if job.PodFailurePolicy != nil || (js.Spec.FailurePolicy != nil && js.Spec.FailurePolicy.RestartStrategy == InPlaceRestart) {
		return corev1.RestartPolicyNever
	}
	return corev1.RestartPolicyOnFailure
}

// DefaultRuleName is the name given to the failure-policy rule at index i
// when it has none.
func DefaultRuleName(i int) string {
	return fmt.Sprintf("failurePolicyRule%d", i)
}
