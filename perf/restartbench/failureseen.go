package restartbench

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// failureWatch notes when the API server first shows a Pod's failure: the
// kubelet's write of a container's exit, or the Pod's deletion. Detection
// splits there into what the node took to report the failure and what the
// controller took to count it.
type failureWatch struct {
	mu   sync.Mutex
	seen time.Time
	stop func()
}

// watchFailure watches the victim alone (a field selector: one Pod's
// events, not N) from the version read before the failure.
func watchFailure(ctx context.Context, cs kubernetes.Interface, victim *corev1.Pod) (*failureWatch, error) {
	w, err := cs.CoreV1().Pods(victim.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", victim.Name).String(),
		ResourceVersion: victim.ResourceVersion,
	})
	if err != nil {
		return nil, err
	}
	fw := &failureWatch{stop: w.Stop}
	// Read now, once: the caller's Pod is written by the failure's patch
	// while the watch runs.
	uid, before := victim.UID, restartCounts(victim)
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || pod.UID != uid {
				continue
			}
			if ev.Type == watch.Deleted || pod.DeletionTimestamp != nil || failedSince(before, pod) {
				fw.mu.Lock()
				if fw.seen.IsZero() {
					fw.seen = time.Now()
				}
				fw.mu.Unlock()
			}
		}
	}()
	return fw, nil
}

// at is when the failure was first seen, zero if not (yet).
func (fw *failureWatch) at() time.Time {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.seen
}

// restartCounts are the restart counts of a Pod's containers, by name.
func restartCounts(pod *corev1.Pod) map[string]int32 {
	counts := map[string]int32{}
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		counts[cs.Name] = cs.RestartCount
	}
	return counts
}

// failedSince reports whether a container of the Pod terminated or
// restarted since it had the restart counts before, when every container
// ran.
func failedSince(before map[string]int32, now *corev1.Pod) bool {
	for _, cs := range slices.Concat(now.Status.InitContainerStatuses, now.Status.ContainerStatuses) {
		if cs.State.Terminated != nil || cs.RestartCount > before[cs.Name] {
			return true
		}
	}
	return false
}
