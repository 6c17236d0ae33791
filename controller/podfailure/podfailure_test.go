package podfailure

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func onExitCodes(action batchv1.PodFailurePolicyAction, op batchv1.PodFailurePolicyOnExitCodesOperator, container *string, codes ...int32) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{
		Action:      action,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{ContainerName: container, Operator: op, Values: codes},
	}
}

func TestExitCodes(t *testing.T) {
	cases := map[string]struct {
		container string
		policy    *batchv1.PodFailurePolicy
		want      Codes
		failsOn   map[int32]bool
	}{
		"no policy": {
			container: "worker",
			failsOn:   map[int32]bool{0: false, 1: false, 137: false},
		},
		"FailJob on codes In": {
			container: "worker",
			policy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				onExitCodes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, nil, 4, 3),
			}},
			want:    Codes{Fatal: []int32{3, 4}},
			failsOn: map[int32]bool{0: false, 1: false, 3: true, 4: true},
		},
		"first matching rule wins": {
			container: "worker",
			policy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				onExitCodes(batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyOnExitCodesOpIn, nil, 42),
				onExitCodes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpNotIn, nil, 7),
			}},
			want:    Codes{NonFatal: []int32{7, 42}, OthersFatal: true},
			failsOn: map[int32]bool{0: false, 7: false, 42: false, 1: true},
		},
		"a rule for another container does not apply": {
			container: "worker",
			policy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				onExitCodes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, ptr.To("sidecar"), 1),
			}},
			failsOn: map[int32]bool{1: false},
		},
		"pod-condition rules are not about exit codes": {
			container: "worker",
			policy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionFailJob,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: "DisruptionTarget"}},
			}}},
			failsOn: map[int32]bool{1: false},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ExitCodes(tc.container, tc.policy)); diff != "" {
				t.Errorf("ExitCodes (-want +got):\n%s", diff)
			}
			got := make(map[int32]bool, len(tc.failsOn))
			for code := range tc.failsOn {
				got[code] = FailsJob(tc.container, tc.policy, code)
			}
			if diff := cmp.Diff(tc.failsOn, got); diff != "" {
				t.Errorf("FailsJob by exit code (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatchPod(t *testing.T) {
	failJobOn3 := onExitCodes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, nil, 3)
	ignoreDisruption := batchv1.PodFailurePolicyRule{
		Action:          batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}},
	}
	pod := func(exit int32, conditions ...corev1.PodConditionType) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "worker", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit}},
		}}}}
		for _, c := range conditions {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue})
		}
		return p
	}
	type result struct {
		Action  batchv1.PodFailurePolicyAction
		Matched bool
	}
	cases := map[string]struct {
		rules []batchv1.PodFailurePolicyRule
		pod   *corev1.Pod
		want  result
	}{
		"an exit code rule":               {rules: []batchv1.PodFailurePolicyRule{failJobOn3}, pod: pod(3), want: result{batchv1.PodFailurePolicyActionFailJob, true}},
		"another code matches nothing":    {rules: []batchv1.PodFailurePolicyRule{failJobOn3}, pod: pod(1)},
		"an earlier condition rule wins":  {rules: []batchv1.PodFailurePolicyRule{ignoreDisruption, failJobOn3}, pod: pod(3, corev1.DisruptionTarget), want: result{batchv1.PodFailurePolicyActionIgnore, true}},
		"a condition the Pod lacks skips": {rules: []batchv1.PodFailurePolicyRule{ignoreDisruption, failJobOn3}, pod: pod(3), want: result{batchv1.PodFailurePolicyActionFailJob, true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			action, matched := MatchPod(&batchv1.PodFailurePolicy{Rules: tc.rules}, tc.pod)
			if diff := cmp.Diff(tc.want, result{action, matched}); diff != "" {
				t.Errorf("MatchPod (-want +got):\n%s", diff)
			}
		})
	}
}
