package controller

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/state"
)

// podSignal classifies a Pod's update. Urgent: the Pod stops counting as a
// member (being deleted, or Failed), a worker exits with an error, or the
// agent restarts; each may start a restart or fail the JobSet. Ordinary:
// any other change of what the controller reads of a Pod (its epoch
// annotation, readiness, containers' states, among them a container that
// starts or stops waiting for an image the kubelet cannot pull, which
// only a condition reports).
func podSignal(old, cur *corev1.Pod) signal {
	o, n := state.ObservePod(old), state.ObservePod(cur)
	switch {
	case !o.Gone && n.Gone,
		o.WorkerExited == "" && n.WorkerExited != "",
		n.AgentRestarts > o.AgentRestarts:
		return urgent
	case o != n,
		old.Annotations[jobset.EpochKey] != cur.Annotations[jobset.EpochKey],
		!old.DeletionTimestamp.Equal(cur.DeletionTimestamp),
		old.ResourceVersion == cur.ResourceVersion: // the informer's resync
		return ordinary
	}
	return ignored
}

// jobSignal classifies a Job's update. Urgent: the Job is being deleted,
// finishes (or is failing: FailureTarget). Readiness: it becomes ready or
// unready, which gates the next replicated jobs of an InOrder startup and
// ends a Recreate's restart. Ordinary: any other change of its status,
// labels or suspension.
func jobSignal(old, cur *batchv1.Job) signal {
	for _, t := range []batchv1.JobConditionType{batchv1.JobFailed, batchv1.JobFailureTarget, batchv1.JobComplete} {
		if !state.JobFinished(old, t) && state.JobFinished(cur, t) {
			return urgent
		}
	}
	switch {
	case old.DeletionTimestamp == nil && cur.DeletionTimestamp != nil:
		return urgent
	case state.JobReady(old) != state.JobReady(cur):
		return readiness
	case old.ResourceVersion == cur.ResourceVersion, // the informer's resync
		!equality.Semantic.DeepEqual(old.Status, cur.Status),
		!equality.Semantic.DeepEqual(old.Labels, cur.Labels),
		!equality.Semantic.DeepEqual(old.Spec.Suspend, cur.Spec.Suspend):
		return ordinary
	}
	return ignored
}
