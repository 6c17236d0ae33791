package wrappers

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// JobSetWrapper builds a JobSet.
type JobSetWrapper struct{ jobsetv1alpha2.JobSet }

// MakeJobSet starts a JobSet with no replicated Jobs.
func MakeJobSet(name, namespace string) *JobSetWrapper {
	return &JobSetWrapper{jobsetv1alpha2.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: jobsetv1alpha2.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
	}}
}

// Obj returns the JobSet.
func (w *JobSetWrapper) Obj() *jobsetv1alpha2.JobSet { return &w.JobSet }

// Clone returns an independent copy of the builder.
func (w *JobSetWrapper) Clone() *JobSetWrapper { return &JobSetWrapper{*w.DeepCopy()} }

// Label adds a label.
func (w *JobSetWrapper) Label(k, v string) *JobSetWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// Annotation adds an annotation.
func (w *JobSetWrapper) Annotation(k, v string) *JobSetWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[k] = v
	return w
}

// ReplicatedJob appends a replicated Job.
func (w *JobSetWrapper) ReplicatedJob(rj jobsetv1alpha2.ReplicatedJob) *JobSetWrapper {
	w.Spec.ReplicatedJobs = append(w.Spec.ReplicatedJobs, rj)
	return w
}

// FailurePolicy sets spec.failurePolicy.
func (w *JobSetWrapper) FailurePolicy(fp *jobsetv1alpha2.FailurePolicy) *JobSetWrapper {
	w.Spec.FailurePolicy = fp
	return w
}

// SuccessPolicy sets spec.successPolicy.
func (w *JobSetWrapper) SuccessPolicy(sp *jobsetv1alpha2.SuccessPolicy) *JobSetWrapper {
	w.Spec.SuccessPolicy = sp
	return w
}

// StartupPolicy sets spec.startupPolicy.startupPolicyOrder.
func (w *JobSetWrapper) StartupPolicy(order jobsetv1alpha2.StartupPolicyOptions) *JobSetWrapper {
	w.Spec.StartupPolicy = &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: order}
	return w
}

// Network sets spec.network.
func (w *JobSetWrapper) Network(n *jobsetv1alpha2.Network) *JobSetWrapper {
	w.Spec.Network = n
	return w
}

// Suspend sets spec.suspend.
func (w *JobSetWrapper) Suspend(s bool) *JobSetWrapper {
	w.Spec.Suspend = ptr.To(s)
	return w
}

// ManagedBy sets spec.managedBy.
func (w *JobSetWrapper) ManagedBy(m string) *JobSetWrapper {
	w.Spec.ManagedBy = ptr.To(m)
	return w
}

// TTLSecondsAfterFinished sets spec.ttlSecondsAfterFinished.
func (w *JobSetWrapper) TTLSecondsAfterFinished(s int32) *JobSetWrapper {
	w.Spec.TTLSecondsAfterFinished = ptr.To(s)
	return w
}

// ReplicatedJobWrapper builds a replicated Job whose Pods run one container.
type ReplicatedJobWrapper struct{ jobsetv1alpha2.ReplicatedJob }

// MakeReplicatedJob starts a replicated Job of one Job with one Pod running
// a container named "worker".
func MakeReplicatedJob(name string) *ReplicatedJobWrapper {
	return &ReplicatedJobWrapper{jobsetv1alpha2.ReplicatedJob{
		Name:     name,
		Replicas: 1,
		Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Parallelism:  ptr.To[int32](1),
			Completions:  ptr.To[int32](1),
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "worker", Image: "registry.example/worker:1"}},
			}},
		}},
	}}
}

// Obj returns the replicated Job.
func (w *ReplicatedJobWrapper) Obj() jobsetv1alpha2.ReplicatedJob { return w.ReplicatedJob }

// Replicas sets the number of Jobs.
func (w *ReplicatedJobWrapper) Replicas(n int32) *ReplicatedJobWrapper {
	w.ReplicatedJob.Replicas = n
	return w
}

// Parallelism sets parallelism and completions of each Job to n.
func (w *ReplicatedJobWrapper) Parallelism(n int32) *ReplicatedJobWrapper {
	w.Template.Spec.Parallelism = ptr.To(n)
	w.Template.Spec.Completions = ptr.To(n)
	return w
}

// BackoffLimit sets the Jobs' backoffLimit.
func (w *ReplicatedJobWrapper) BackoffLimit(n int32) *ReplicatedJobWrapper {
	w.Template.Spec.BackoffLimit = ptr.To(n)
	return w
}

// DependsOn adds a dependency.
func (w *ReplicatedJobWrapper) DependsOn(name string, status jobsetv1alpha2.DependsOnStatus) *ReplicatedJobWrapper {
	w.ReplicatedJob.DependsOn = append(w.ReplicatedJob.DependsOn, jobsetv1alpha2.DependsOn{Name: name, Status: status})
	return w
}

// PodFailurePolicy sets the Jobs' podFailurePolicy.
func (w *ReplicatedJobWrapper) PodFailurePolicy(p *batchv1.PodFailurePolicy) *ReplicatedJobWrapper {
	w.Template.Spec.PodFailurePolicy = p
	return w
}

// NodeWrapper builds a Node that the scheduler can place Pods on.
type NodeWrapper struct{ corev1.Node }

// MakeNode starts a Ready Node with room for 110 Pods.
func MakeNode(name string) *NodeWrapper {
	return &NodeWrapper{corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Capacity:    nodeResources(),
			Allocatable: nodeResources(),
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
			}},
		},
	}}
}

func nodeResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourcePods:   resource.MustParse("110"),
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
	}
}

// Obj returns the Node.
func (w *NodeWrapper) Obj() *corev1.Node { return &w.Node }

// Label adds a label.
func (w *NodeWrapper) Label(k, v string) *NodeWrapper {
	w.Labels[k] = v
	return w
}

// DeclaredFeatures sets status.declaredFeatures.
func (w *NodeWrapper) DeclaredFeatures(features ...string) *NodeWrapper {
	w.Status.DeclaredFeatures = features
	return w
}
