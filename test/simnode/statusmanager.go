package simnode

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// statusManager writes a Pod's status to the API server apart from running
// its containers, as the kubelet's status manager does: a container starts
// without waiting for the write of the status before it, and a status
// superseded before it was written is never written (writing it late
// would tell the API server of a state the Pod has left). Before all of a
// Pod's containers start again, the exit that caused it is flushed: the
// kubelet's pod worker syncs the status of the killed containers before
// the sync that starts them again.
type statusManager struct {
	r       *podRunner
	kick    chan struct{}
	pending *corev1.PodStatus
	// writing serializes the writer, flush and close.
	writing sync.Mutex
	// closed: the Pod is being torn down; nothing more is written.
	closed bool
}

func newStatusManager(r *podRunner) *statusManager {
	return &statusManager{r: r, kick: make(chan struct{}, 1)}
}

// publish queues a status, replacing any not written yet.
func (m *statusManager) publish(st *status) {
	built := st.build(m.r.pod())
	m.r.mu.Lock()
	m.pending = &built
	m.r.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// next takes the status to write next.
func (m *statusManager) next() *corev1.PodStatus {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	s := m.pending
	m.pending = nil
	return s
}

// run writes until ctx ends.
func (m *statusManager) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		}
		m.flush(ctx)
	}
}

// flush writes the pending status, if any, now.
func (m *statusManager) flush(ctx context.Context) {
	m.writing.Lock()
	defer m.writing.Unlock()
	for s := m.next(); s != nil && ctx.Err() == nil && !m.closed; s = m.next() {
		if err := m.r.writeStatus(ctx, *s); err != nil && ctx.Err() == nil {
			m.r.sim.opts.Log.Error(err, "writing pod status", "pod", m.r.namespace+"/"+m.r.name)
		}
	}
}

// writeStatus stores a status, retrying on conflicts with the latest Pod.
func (r *podRunner) writeStatus(ctx context.Context, s corev1.PodStatus) error {
	for attempt := 0; ; attempt++ {
		pod := r.pod().DeepCopy()
		// Conditions keep their transition times from what is stored.
		for i, c := range s.Conditions {
			for _, prev := range pod.Status.Conditions {
				if prev.Type == c.Type && prev.Status == c.Status {
					s.Conditions[i].LastTransitionTime = prev.LastTransitionTime
				}
			}
		}
		pod.Status = s
		_, err := r.sim.opts.Client.CoreV1().Pods(r.namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err) && attempt < 20:
			fresh, gerr := r.sim.opts.Client.CoreV1().Pods(r.namespace).Get(ctx, r.name, metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			r.update(fresh)
		default:
			return err
		}
	}
}

// close waits for a write in flight and drops what is pending: the terminal
// status of a deleted or lost Pod must be the last one written.
func (m *statusManager) close() {
	m.writing.Lock()
	defer m.writing.Unlock()
	m.closed = true
	m.next()
}
