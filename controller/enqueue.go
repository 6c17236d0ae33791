package controller

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// DefaultUpdateBatchPeriod is how long ordinary changes of a JobSet's Jobs
// and Pods are gathered before the JobSet is reconciled. During an in-place
// restart every Pod of a JobSet changes several times (its containers stop
// and start, its agent reports the new epoch) and a reconcile reads all N
// Pods: reconciled on every change, a restart of N Pods would cost O(N²).
// Batched, it costs a reconcile per period; and the end of a restart (the
// last epoch reported) is seen at most one period later.
const DefaultUpdateBatchPeriod = 100 * time.Millisecond

// signal is what a change of a child means to its JobSet's reconcile.
type signal int

const (
	// ignored changes decide nothing.
	ignored signal = iota
	// ordinary changes (a counter, a readiness, an epoch reported) are
	// batched.
	ordinary
	// urgent changes (a failure, a deletion, a Job finished or ready) are
	// reconciled at once: detecting a failure is what the restart's
	// latency starts with.
	urgent
)

// batched is the event handler of a child kind, as the Kubernetes Job
// controller handles Pods: urgent changes enqueue the owning JobSet at
// once, ordinary ones after period, so that the ordinary changes of that
// period coalesce into one reconcile (the queue holds a key once, at its
// earliest time). Creations are ordinary, deletions urgent; what an update
// is, classify says from the old and the new object.
func batched[T client.Object](period time.Duration, owner func(client.Object) (types.NamespacedName, bool), classify func(old, cur T) signal) handler.EventHandler {
	enqueue := func(o client.Object, s signal, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		key, ok := owner(o)
		if !ok {
			return
		}
		switch s {
		case urgent:
			q.Add(reconcile.Request{NamespacedName: key})
		case ordinary:
			q.AddAfter(reconcile.Request{NamespacedName: key}, period)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e ctrlevent.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, ordinary, q)
		},
		UpdateFunc: func(_ context.Context, e ctrlevent.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, okOld := e.ObjectOld.(T)
			cur, okNew := e.ObjectNew.(T)
			if !okOld || !okNew {
				return
			}
			enqueue(e.ObjectNew, classify(old, cur), q)
		},
		DeleteFunc: func(_ context.Context, e ctrlevent.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, urgent, q)
		},
	}
}

// jobSetOfPod names the JobSet of a Pod, from the labels its Job gave it.
func jobSetOfPod(o client.Object) (types.NamespacedName, bool) {
	name := o.GetLabels()[jobset.JobSetNameKey]
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: name}, name != ""
}

// jobSetOfJob names the JobSet that controls a Job.
func jobSetOfJob(o client.Object) (types.NamespacedName, bool) {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != jobset.Kind || ref.APIVersion != jobset.GroupVersion.String() {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}, true
}

// podSignal classifies a Pod's update. Urgent: the Pod stops counting as a
// member (being deleted, or Failed), a worker exits with an error, or the
// agent restarts; each may start a restart or fail the JobSet. Ordinary:
// any other change of what the controller reads of a Pod (its epoch
// annotation, readiness, containers' states).
func podSignal(old, cur *corev1.Pod) signal {
	o, n := observePod(old), observePod(cur)
	switch {
	case !o.gone && n.gone,
		o.workerExited == "" && n.workerExited != "",
		n.agentRestarts > o.agentRestarts:
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
// finishes (or is failing: FailureTarget), or becomes ready or unready,
// which gates the next replicated jobs of an InOrder startup. Ordinary: any
// other change of its status, labels or suspension.
func jobSignal(old, cur *batchv1.Job) signal {
	for _, t := range []batchv1.JobConditionType{batchv1.JobFailed, batchv1.JobFailureTarget, batchv1.JobComplete} {
		if !jobFinished(old, t) && jobFinished(cur, t) {
			return urgent
		}
	}
	switch {
	case old.DeletionTimestamp == nil && cur.DeletionTimestamp != nil,
		jobReady(old) != jobReady(cur):
		return urgent
	case old.ResourceVersion == cur.ResourceVersion, // the informer's resync
		!equality.Semantic.DeepEqual(old.Status, cur.Status),
		!equality.Semantic.DeepEqual(old.Labels, cur.Labels),
		!equality.Semantic.DeepEqual(old.Spec.Suspend, cur.Spec.Suspend):
		return ordinary
	}
	return ignored
}
