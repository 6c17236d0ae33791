package simnode

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
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
	// retry is the wait before the next try of a failed write.
	retry time.Duration
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

// flush writes the pending status, if any, now. A write that fails is
// tried again later, unless a newer status replaced it meanwhile, as the
// kubelet's status manager syncs again a status the API server does not
// hold.
func (m *statusManager) flush(ctx context.Context) {
	m.writing.Lock()
	defer m.writing.Unlock()
	for s := m.next(); s != nil && ctx.Err() == nil && !m.closed; s = m.next() {
		err := m.r.writeStatus(ctx, *s)
		switch {
		case err == nil:
			m.retry = 0
			continue
		case ctx.Err() != nil, apierrors.IsConflict(err):
			// Stopping, or the UID precondition failed: the Pod was
			// replaced by one of the same name, whose status is not ours.
			return
		}
		m.retry = min(max(2*m.retry, 100*time.Millisecond), 10*time.Second)
		m.r.sim.opts.Log.Error(err, "writing pod status; trying again", "pod", m.r.namespace+"/"+m.r.name, "after", m.retry)
		m.r.mu.Lock()
		if m.pending == nil {
			m.pending = s
		}
		m.r.mu.Unlock()
		time.AfterFunc(m.retry, func() {
			select {
			case m.kick <- struct{}{}:
			default:
			}
		})
		return
	}
}

// writeStatus stores a status as the kubelet does: a strategic merge patch
// of the status subresource from the status it last wrote, with the Pod's
// UID as a precondition, so that it never conflicts with writes to the
// Pod's metadata (the agents' epoch annotations).
func (r *podRunner) writeStatus(ctx context.Context, s corev1.PodStatus) error {
	r.mu.Lock()
	base := r.written
	r.mu.Unlock()
	if base == nil {
		base = r.pod().Status.DeepCopy()
	}
	// Conditions keep their transition times from what was written.
	for i, c := range s.Conditions {
		for _, prev := range base.Conditions {
			if prev.Type == c.Type && prev.Status == c.Status {
				s.Conditions[i].LastTransitionTime = prev.LastTransitionTime
			}
		}
	}
	patch, err := StatusPatch(r.uid, base, &s)
	if err != nil {
		return err
	}
	_, err = r.sim.kubelet(r.nodeName).Pods(r.namespace).Patch(ctx, r.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	switch {
	case err == nil:
		r.mu.Lock()
		r.written = &s
		r.mu.Unlock()
		if code := workerExitCode(s); code != 0 && workerExitCode(*base) == 0 {
			r.record(ExitWritten, code)
		}
		return nil
	case apierrors.IsNotFound(err):
		return nil
	}
	return err
}

// workerExitCode is the code of a main container the status shows
// terminated with a non-zero code, or 0.
func workerExitCode(s corev1.PodStatus) int32 {
	for _, cs := range s.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return t.ExitCode
		}
	}
	return 0
}

// StatusPatch is a status write of a Pod from old to new as the kubelet's
// status manager sends it: a strategic merge patch of the difference, with
// the Pod's UID as a precondition, which makes it fail on a Pod of the
// same name that replaced this one.
func StatusPatch(uid types.UID, old, new *corev1.PodStatus) ([]byte, error) {
	oldJSON, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid}, "status": old})
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid}, "status": new})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Pod{})
	if err != nil {
		return nil, err
	}
	return addUIDPrecondition(patch, uid)
}

func addUIDPrecondition(patch []byte, uid types.UID) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["uid"] = string(uid)
	m["metadata"] = meta
	return json.Marshal(m)
}

// close waits for a write in flight and drops what is pending: the terminal
// status of a deleted or lost Pod must be the last one written.
func (m *statusManager) close() {
	m.writing.Lock()
	defer m.writing.Unlock()
	m.closed = true
	m.next()
}
