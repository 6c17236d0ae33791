package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/reports"
)

// This file feeds the agents' direct reports (controller/reports) to the
// reconciler as if they were changes of their Pods: the child index
// records every Pod with its report merged in, and a report is classified
// and enqueued as the Pod's own update would be. Nothing else in the
// controller tells a reported epoch from an annotated one.

// recordPod records a Pod's event in the child index, read with its
// report; a deleted Pod's report is forgotten.
func (r *Reconciler) recordPod(pod *corev1.Pod, gone bool) {
	if gone {
		// Out of the index first: a report stored after the Pod is
		// forgotten finds no Pod to refresh, and forgets itself.
		r.children.PodEvent(pod, true)
		r.opts.Reports.Forget(pod.UID)
		return
	}
	// Overlaid under the family's lock: a report stored meanwhile is
	// either read here or refreshes the Pod recorded here.
	r.children.PodEventWith(pod, false, r.opts.Reports.Overlay)
}

// podSignal classifies a Pod's update as read with its report.
func (r *Reconciler) podSignal(old, cur *corev1.Pod) signal {
	return podSignal(r.opts.Reports.Overlay(old), r.opts.Reports.Overlay(cur))
}

// reportChanged records the Pod of a report that changed what is held for
// it and enqueues its JobSet, classified as the Pod's update from the
// report before to this one. It refreshes the Pod the child index holds,
// the one the Pods' event handler recorded last, rather than reading the
// cache: the cache changes before the handler runs, so a Pod read there
// could be put back after the handler recorded its deletion, or over a
// newer version. A Pod the index does not hold (gone, or not seen yet)
// is left to its own event.
func (r *Reconciler) reportChanged(pod *corev1.Pod, old, cur protocol.Report) {
	// What the store holds now, not cur: two reports of one Pod told out
	// of order must leave the newer recorded. The Pod held carries the
	// reports merged before, and merging only raises.
	held := r.children.RefreshPod(pod.Namespace, pod.Name, pod.UID, r.opts.Reports.Overlay)
	if held == nil {
		// Gone from the cache too: its deletion may have been handled
		// before its report was stored, which nothing would forget.
		latest := &corev1.Pod{}
		if err := r.client.Get(context.Background(), client.ObjectKeyFromObject(pod), latest, client.UnsafeDisableDeepCopy); apierrors.IsNotFound(err) || (err == nil && latest.UID != pod.UID) {
			r.opts.Reports.Forget(pod.UID)
		}
		return
	}
	key, ok := jobSetOfPod(held)
	q := r.queue.Load()
	if !ok || q == nil {
		return
	}
	enqueueFor(key, podSignal(reports.WithReport(pod, old), reports.WithReport(pod, cur)), r.opts.UpdateBatchPeriod, r.jobSetState, *q)
}

// sessionSeen is when a JobSet's broadcast first showed this leader's
// session; at is zero while it showed another's.
type sessionSeen struct {
	uid types.UID
	at  time.Time
}

// reportsSince is when the JobSet's broadcast, as the cache shows it, first
// named mine, this leader's report session ("" where its agents report on
// their Pods): from about then its agents report the way this leader
// takes (decide.ReportGrace). settling says whether they may still be
// turning to it: this leader takes direct reports, or the broadcast named
// another session under this leader, whose agents reported elsewhere and
// left no epoch on their Pods. Zero and settling while the broadcast
// names another session.
func (r *Reconciler) reportsSince(js *jobset.JobSet, broadcast map[string]string, mine string) (since time.Time, settling bool) {
	key := client.ObjectKeyFromObject(js)
	v, known := r.sessions.Load(key)
	seen, _ := v.(sessionSeen)
	known = known && seen.uid == js.UID
	if broadcast[protocol.KeyReportSession] != mine {
		if !known || !seen.at.IsZero() {
			r.sessions.Store(key, sessionSeen{uid: js.UID})
		}
		return time.Time{}, true
	}
	switch {
	case known && !seen.at.IsZero():
		return seen.at, true
	case known || mine != "":
		now := sessionSeen{uid: js.UID, at: r.opts.Clock.Now()}
		r.sessions.Store(key, now)
		return now.at, true
	default:
		// The agents have reported on their Pods all along.
		return time.Time{}, false
	}
}
