package testutil

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// T0 is the time of the tests' first reconcile.
var T0 = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

// JobSet is a defaulted JobSet with replicated Jobs given as
// name:replicas pairs.
func JobSet(rjs ...any) *jobset.JobSet {
	js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns", UID: "uid-1"}}
	for i := 0; i < len(rjs); i += 2 {
		js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, jobset.ReplicatedJob{
			Name: rjs[i].(string), Replicas: int32(rjs[i+1].(int)),
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}},
			}},
		})
	}
	jobset.Default(js)
	return js
}

// InPlaceJobSet has two replicated jobs of one Job with two Pods each.
func InPlaceJobSet(deprecated, synced int32) *jobset.JobSet {
	js := JobSet("driver", 1, "workers", 1)
	js.Spec.FailurePolicy = &jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 3}
	js.Status.DeprecatedEpoch, js.Status.SyncedEpoch = deprecated, synced
	return js
}

// FailJobOn is a podFailurePolicy that fails the Job when a container
// exits with one of codes.
func FailJobOn(codes ...int32) *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:      batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: codes},
	}}}
}

// Names lists the Jobs' names, in their order.
func Names(jobs []*batchv1.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Name)
	}
	return out
}
