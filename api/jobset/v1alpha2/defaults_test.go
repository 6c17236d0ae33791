package v1alpha2

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestDefault(t *testing.T) {
	js := &JobSet{Spec: JobSetSpec{
		FailurePolicy: &FailurePolicy{Rules: []FailurePolicyRule{{Action: FailJobSet}, {Name: "named", Action: RestartJobSet}}},
		ReplicatedJobs: []ReplicatedJob{{Name: "w", Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever}},
		}}}},
	}}
	Default(js)

	want := JobSetSpec{
		SuccessPolicy: &SuccessPolicy{Operator: OperatorAll},
		StartupPolicy: &StartupPolicy{StartupPolicyOrder: AnyOrder},
		Network:       &Network{EnableDNSHostnames: ptr.To(true), PublishNotReadyAddresses: ptr.To(true)},
		FailurePolicy: &FailurePolicy{RestartStrategy: Recreate, Rules: []FailurePolicyRule{
			{Name: "failurePolicyRule0", Action: FailJobSet}, {Name: "named", Action: RestartJobSet},
		}},
		ReplicatedJobs: []ReplicatedJob{{Name: "w", GroupName: "default", Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Template:       corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever}},
		}}}},
	}
	if diff := cmp.Diff(want, js.Spec); diff != "" {
		t.Errorf("Default (-want +got):\n%s", diff)
	}

	again := js.DeepCopy()
	Default(again)
	if diff := cmp.Diff(js, again); diff != "" {
		t.Errorf("Default is not idempotent (-once +twice):\n%s", diff)
	}
}

func TestDefaultPodRestartPolicy(t *testing.T) {
	js := &JobSet{Spec: JobSetSpec{ReplicatedJobs: []ReplicatedJob{{Name: "w"}}}}
	Default(js)
	if got := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.RestartPolicy; got != corev1.RestartPolicyOnFailure {
		t.Errorf("pod restartPolicy defaulted to %q, want OnFailure (a Job rejects Always)", got)
	}
}

func TestDefaultPodRestartPolicyWhereOnlyNeverWorks(t *testing.T) {
	withPFP := &JobSet{Spec: JobSetSpec{ReplicatedJobs: []ReplicatedJob{{Name: "w", Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
		PodFailurePolicy: &batchv1.PodFailurePolicy{},
	}}}}}}
	inPlace := &JobSet{Spec: JobSetSpec{
		FailurePolicy:  &FailurePolicy{RestartStrategy: InPlaceRestart},
		ReplicatedJobs: []ReplicatedJob{{Name: "w"}},
	}}
	for name, js := range map[string]*JobSet{"podFailurePolicy": withPFP, "InPlaceRestart": inPlace} {
		Default(js)
		if got := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.RestartPolicy; got != corev1.RestartPolicyNever {
			t.Errorf("%s: pod restartPolicy defaulted to %q, want Never", name, got)
		}
	}
}

func TestDefaultVolumeClaimPolicies(t *testing.T) {
	js := &JobSet{Spec: JobSetSpec{VolumeClaimPolicies: []VolumeClaimPolicy{
		{},
		{RetentionPolicy: &VolumeRetentionPolicy{}},
		{RetentionPolicy: &VolumeRetentionPolicy{WhenDeleted: ptr.To(RetentionPolicyRetain)}},
	}}}
	Default(js)
	want := []RetentionPolicyType{RetentionPolicyDelete, RetentionPolicyDelete, RetentionPolicyRetain}
	var got []RetentionPolicyType
	for _, p := range js.Spec.VolumeClaimPolicies {
		got = append(got, *p.RetentionPolicy.WhenDeleted)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("retentionPolicy.whenDeleted (-want +got):\n%s", diff)
	}
}
