package controller

import (
	"context"
	"time"

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
	// readiness changes (a Job became ready or unready) gate the startup
	// order and end a recreation's restart: urgent, except for a JobSet
	// that restarts in place, whose start the barriers gate and whose
	// Jobs' readiness is only counted. Reconciled at once there, the N
	// Jobs that become ready again after a restart would each bring a
	// status write of their own.
	readiness
	// urgent changes (a failure, a deletion, a Job finished) are
	// reconciled at once: detecting a failure is what the restart's
	// latency starts with.
	urgent
)

// jobSetState is what the handlers read of a JobSet, from the cache, to
// say how urgent a change of its children is.
type jobSetState struct {
	// inPlace: the JobSet restarts in place (InPlaceActive).
	inPlace bool
	// restarting: an in-place restart is under way (the restart state's
	// Restarting). Not while the JobSet is suspended, or starting again
	// after it was resumed or recreated: the events of its Pods then come
	// one by one, as on a first start, and a failure among them is urgent.
	restarting bool
}

// batched is the event handler of a child kind, as the Kubernetes Job
// controller handles Pods: urgent changes enqueue the owning JobSet at
// once, ordinary ones after period, so that the ordinary changes of that
// period coalesce into one reconcile (the queue holds a key once, at its
// earliest time). Creations are ordinary, deletions urgent; what an update
// is, classify says from the old and the new object.
//
// While the JobSet restarts in place (state says so, from the cache),
// every one of its Pods and Jobs changes as a failure would (each worker is
// stopped, each agent exits, each Job loses its ready Pods): what is urgent
// is the first failure of a synced group, not the N that the restart
// itself causes, so during a restart only deletions are reconciled at
// once.
//
// record, if set, is told of every creation, update and deletion (gone)
// before the JobSet is enqueued, so that the reconcile the event brings
// finds it recorded (ChildIndex).
func batched[T client.Object](period time.Duration, owner func(client.Object) (types.NamespacedName, bool), classify func(old, cur T) signal, state func(types.NamespacedName) jobSetState, record func(obj T, gone bool)) handler.EventHandler {
	if record == nil {
		record = func(T, bool) {}
	}
	enqueue := func(o client.Object, s signal, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if key, ok := owner(o); ok {
			enqueueFor(key, s, period, state, q)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e ctrlevent.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if o, ok := e.Object.(T); ok {
				record(o, false)
			}
			enqueue(e.Object, ordinary, q)
		},
		UpdateFunc: func(_ context.Context, e ctrlevent.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, okOld := e.ObjectOld.(T)
			cur, okNew := e.ObjectNew.(T)
			if !okOld || !okNew {
				return
			}
			record(cur, false)
			enqueue(e.ObjectNew, classify(old, cur), q)
		},
		DeleteFunc: func(_ context.Context, e ctrlevent.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			// A tombstone's last known state (DeleteStateUnknown) is
			// forgotten alike: the index finds the object by its key.
			if o, ok := e.Object.(T); ok {
				record(o, true)
			}
			if key, ok := owner(e.Object); ok {
				q.Add(reconcile.Request{NamespacedName: key})
			}
		},
	}
}

// enqueueFor enqueues the JobSet key for a change of signal s of one of
// its children: at once if urgent, after period if ordinary (see batched).
func enqueueFor(key types.NamespacedName, s signal, period time.Duration, state func(types.NamespacedName) jobSetState, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if s == urgent || s == readiness {
		var st jobSetState
		if state != nil {
			st = state(key)
		}
		switch {
		case st.restarting, s == readiness && st.inPlace:
			s = ordinary
		default:
			s = urgent
		}
	}
	switch s {
	case urgent:
		q.Add(reconcile.Request{NamespacedName: key})
	case ordinary:
		q.AddAfter(reconcile.Request{NamespacedName: key}, period)
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
