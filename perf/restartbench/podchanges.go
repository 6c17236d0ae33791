package restartbench

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// podChanges counts the changes of a namespace's Pods from a resource
// version on, as a watcher of them receives them. A write that leaves its
// Pod as it was brings no event, so the count is the writes that changed
// something.
//
// The API server's own count of watch events sent cannot tell that: it
// counts an event when it is written to a watcher's stream, and on a
// loaded machine the controller manager's and the scheduler's streams
// lag, so a read right after the writes misses some of them.
type podChanges struct {
	cs        kubernetes.Interface
	namespace string
	watcher   *watchtools.RetryWatcher
	// done is closed once the watcher's results are drained.
	done     chan struct{}
	stopOnce sync.Once

	mu sync.Mutex
	// seen is the resource version of each Pod's last change received.
	seen    map[string]string
	changes int
	// failed is the error the watch ended with, if it did.
	failed error
}

// watchPodChanges starts counting the changes of the Pods in namespace
// after those of its list at the time.
func watchPodChanges(ctx context.Context, cs kubernetes.Interface, namespace string) (*podChanges, error) {
	list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return cs.CoreV1().Pods(namespace).Watch(ctx, opts)
	}}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw)
	if err != nil {
		return nil, err
	}
	p := &podChanges{cs: cs, namespace: namespace, watcher: w, seen: map[string]string{}, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ev := range w.ResultChan() {
			p.receive(ev)
		}
	}()
	return p, nil
}

// receive counts a modification; an error event (the RetryWatcher gave
// up: its resource version expired, say) is kept for count to return.
func (p *podChanges) receive(ev watch.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev.Type {
	case watch.Modified:
		if pod, ok := ev.Object.(*corev1.Pod); ok {
			p.seen[pod.Name] = pod.ResourceVersion
			p.changes++
		}
	case watch.Error:
		if p.failed == nil {
			p.failed = apierrors.FromObject(ev.Object)
		}
	}
}

// stop ends the watch; it may be called more than once.
func (p *podChanges) stop() {
	p.stopOnce.Do(func() {
		p.watcher.Stop()
		<-p.done
	})
}

// count waits, at most timeout, until the watcher has received every Pod
// as it is now, then stops it and returns the changes received.
func (p *podChanges) count(ctx context.Context, timeout time.Duration) (int, error) {
	defer p.stop()
	list, err := p.cs.CoreV1().Pods(p.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	caughtUp := func(context.Context) (bool, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.failed != nil {
			return false, fmt.Errorf("the watch ended: %w", p.failed)
		}
		for _, pod := range list.Items {
			if p.seen[pod.Name] != pod.ResourceVersion {
				return false, nil
			}
		}
		return true, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, caughtUp); err != nil {
		return 0, fmt.Errorf("counting the changes of namespace %s's Pods: the watch did not receive their last changes within %v: %w", p.namespace, timeout, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changes, nil
}
