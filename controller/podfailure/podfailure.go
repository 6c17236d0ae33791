package podfailure

import (
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// FailsJob reports whether the podFailurePolicy turns an exit of the
// container with code into a Job failure. Exit code 0 never fails a Job:
// the Job controller leaves succeeded containers out of onExitCodes rules.
func FailsJob(container string, pfp *batchv1.PodFailurePolicy, code int32) bool {
	if pfp == nil || code == 0 {
		return false
	}
	for _, r := range pfp.Rules {
		if selects(r.OnExitCodes, container, code) {
			return r.Action == batchv1.PodFailurePolicyActionFailJob
		}
	}
	return false
}

// selects reports whether an onExitCodes requirement selects an exit of the
// container with code (never 0: succeeded containers are left out).
func selects(req *batchv1.PodFailurePolicyOnExitCodesRequirement, container string, code int32) bool {
	if req == nil || code == 0 || !appliesTo(req, container) {
		return false
	}
	return (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) == slices.Contains(req.Values, code)
}

// Codes is what a podFailurePolicy says about a container's non-zero exit
// codes.
type Codes struct {
	// Fatal lists, sorted, the codes the policy names that fail the Job.
	Fatal []int32
	// NonFatal lists, sorted, the codes the policy names that do not.
	NonFatal []int32
	// OthersFatal reports whether every code the policy does not name fails
	// the Job (a NotIn rule with FailJob, for example).
	OthersFatal bool
}

// ExitCodes evaluates the policy for every non-zero exit code of the
// container: the codes its rules name one by one, and all the others at once.
func ExitCodes(container string, pfp *batchv1.PodFailurePolicy) Codes {
	var out Codes
	codes := mentionedCodes(container, pfp)
	for _, c := range codes {
		switch {
		case c == 0:
		case FailsJob(container, pfp, c):
			out.Fatal = append(out.Fatal, c)
		default:
			out.NonFatal = append(out.NonFatal, c)
		}
	}
	out.OthersFatal = FailsJob(container, pfp, unmentionedCode(codes))
	return out
}

// mentionedCodes lists, sorted and unique, the exit codes the policy's
// rules name for the container.
func mentionedCodes(container string, pfp *batchv1.PodFailurePolicy) []int32 {
	if pfp == nil {
		return nil
	}
	var out []int32
	for _, r := range pfp.Rules {
		if r.OnExitCodes != nil && appliesTo(r.OnExitCodes, container) {
			out = append(out, r.OnExitCodes.Values...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// unmentionedCode returns a non-zero exit code none of the rules names; it
// stands for every such code.
func unmentionedCode(mentioned []int32) int32 {
	for c := int32(1); ; c++ {
		if !slices.Contains(mentioned, c) {
			return c
		}
	}
}

func appliesTo(req *batchv1.PodFailurePolicyOnExitCodesRequirement, container string) bool {
	return req.ContainerName == nil || *req.ContainerName == container
}

// MatchPod evaluates the policy for a failed Pod as the Job controller
// does: the rules in order, the first that matches decides. An onExitCodes
// rule matches a container (regular ones first, then init containers)
// that terminated with a non-zero code the requirement selects; an
// onPodConditions rule matches a condition of the Pod with that type and
// status (True unless said). It returns the action and whether a rule
// matched.
func MatchPod(pfp *batchv1.PodFailurePolicy, pod *corev1.Pod) (batchv1.PodFailurePolicyAction, bool) {
	if pfp == nil {
		return "", false
	}
	statuses := slices.Concat(pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses)
	for _, r := range pfp.Rules {
		for _, s := range statuses {
			if t := s.State.Terminated; t != nil && selects(r.OnExitCodes, s.Name, t.ExitCode) {
				return r.Action, true
			}
		}
		for _, pattern := range r.OnPodConditions {
			want := pattern.Status
			if want == "" {
				want = corev1.ConditionTrue
			}
			for _, c := range pod.Status.Conditions {
				if c.Type == pattern.Type && c.Status == want {
					return r.Action, true
				}
			}
		}
	}
	return "", false
}
