package restartbench

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// workerStartsFromLogs waits until n Pods of the namespace have a worker
// that started after t0, by the workers' own logs (the test worker logs
// "<RFC3339Nano> started pod=..." as its first line), and returns each
// Pod's start. On real nodes this is the one measure of "past its barrier"
// that holds in every scope: in container scope the kubelet starts the
// worker's container once the barrier lifted, in process scope the
// supervisor starts the worker in a container that never stopped, and
// under Recreate the new Pods' workers start with no barrier.
func workerStartsFromLogs(ctx context.Context, cs kubernetes.Interface, namespace string, n int, t0 time.Time, timeout time.Duration) (map[string]time.Time, error) {
	starts := map[string]time.Time{}
	since := metav1.NewTime(t0.Add(-time.Second)) // the API's seconds, rounded down
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if _, ok := starts[p.Name]; ok || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				continue
			}
			raw, err := cs.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "worker", SinceTime: &since}).DoRaw(ctx)
			if err != nil {
				continue
			}
			if at, ok := workerStarted(string(raw), t0); ok {
				starts[p.Name] = at
			}
		}
		return len(starts) >= n, nil
	})
	if err != nil {
		return starts, fmt.Errorf("%d of %d workers started after the failure by their logs: %w", len(starts), n, err)
	}
	return starts, nil
}

// workerStarted finds the last start of a worker after t0 in the log of
// one Pod's worker container (the Pod's name in the line, if any, is the
// POD_NAME the worker was given).
func workerStarted(log string, t0 time.Time) (time.Time, bool) {
	var last time.Time
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		stamp, rest, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(rest, "started pod=") {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err == nil && at.After(t0) {
			last = at
		}
	}
	return last, !last.IsZero()
}

// firstLogLines returns, for every Pod of the namespace, when the given
// container wrote its first line, by the container runtime's own stamp on
// it (kubectl logs --timestamps): when its process was up, without waiting
// for the kubelet's next status write.
func firstLogLines(ctx context.Context, cs kubernetes.Interface, namespace, container string) (map[string]time.Time, error) {
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	// The stamp and a little of the line: the kubelet counts the stamp
	// in the limit.
	limit := int64(128)
	for _, p := range pods.Items {
		raw, err := cs.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, Timestamps: true, LimitBytes: &limit}).DoRaw(ctx)
		if err != nil {
			continue
		}
		stamp, _, _ := strings.Cut(string(raw), " ")
		if at, err := time.Parse(time.RFC3339Nano, stamp); err == nil {
			out[p.Name] = at
		}
	}
	return out, nil
}
