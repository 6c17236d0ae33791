package reports

import (
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

// Store holds the agents' reports by Pod UID: soft state, lost with the
// leader and said again by every agent to the next one (a new
// protocol.KeyReportSession in the broadcast asks them to).
//
// The controller reads a Pod through Overlay: the Pod as the cache holds
// it, with what its agent reported in place of the annotations its agent
// would have written. The rest of the controller reads Pods as before, and
// a group whose agents report some directly and some on their Pods (the
// fallback, upstream JobSet's agent) is one group.
type Store struct {
	mu    sync.RWMutex
	byPod map[types.UID]protocol.Report
	// changed is told of every report that changes what is held for a
	// Pod (OnChange).
	changed func(pod *corev1.Pod, old, cur protocol.Report)
}

// OnChange sets what is told of every report that changes what the store
// holds for a Pod, with the report before (zero if none) and the new one:
// the controller records the Pod again and reconciles its JobSet, as for
// an event of the Pod. Set before the endpoint serves.
func (s *Store) OnChange(fn func(pod *corev1.Pod, old, cur protocol.Report)) { s.changed = fn }

// NewStore returns an empty store.
func NewStore() *Store { return &Store{byPod: map[types.UID]protocol.Report{}} }

// Get returns the report held for a Pod.
func (s *Store) Get(uid types.UID) (protocol.Report, bool) {
	if s == nil {
		return protocol.Report{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.byPod[uid]
	return r, ok
}

// Put replaces the report held for pod, tells OnChange's function if it
// changed, and reports whether it did.
func (s *Store) Put(pod *corev1.Pod, r protocol.Report) bool {
	s.mu.Lock()
	old := s.byPod[pod.UID]
	s.byPod[pod.UID] = r
	s.mu.Unlock()
	return s.told(pod, old, r)
}

// Merge takes a report of pod into what is held, in one step against
// reports of the same Pod taken meanwhile: refused (behind) if its epoch
// is below the one held; counts, the ready epoch and the last worker exit
// only rise, so that an agent that started again and lost its count keeps
// the count held. It tells OnChange's function if what is held changed.
func (s *Store) Merge(pod *corev1.Pod, r protocol.Report) (stored protocol.Report, changed, behind bool) {
	s.mu.Lock()
	prev := s.byPod[pod.UID]
	if r.Epoch < prev.Epoch {
		s.mu.Unlock()
		return prev, false, true
	}
	stored = r
	stored.WorkerRestarts = max(r.WorkerRestarts, prev.WorkerRestarts)
	stored.ReadyEpoch = max(r.ReadyEpoch, prev.ReadyEpoch)
	if r.WorkerExit == nil || (prev.WorkerExit != nil && prev.WorkerExit.Epoch > r.WorkerExit.Epoch) {
		stored.WorkerExit = prev.WorkerExit
	}
	s.byPod[pod.UID] = stored
	s.mu.Unlock()
	return stored, s.told(pod, prev, stored), false
}

// told tells OnChange's function of a change, and reports whether there
// was one.
func (s *Store) told(pod *corev1.Pod, old, cur protocol.Report) bool {
	if equalReports(old, cur) {
		return false
	}
	if s.changed != nil {
		s.changed(pod, old, cur)
	}
	return true
}

func equalReports(a, b protocol.Report) bool {
	return a.JobSet == b.JobSet && a.Epoch == b.Epoch && a.WorkerRestarts == b.WorkerRestarts && a.ReadyEpoch == b.ReadyEpoch &&
		(a.WorkerExit == nil) == (b.WorkerExit == nil) && (a.WorkerExit == nil || *a.WorkerExit == *b.WorkerExit)
}

// Forget drops a deleted Pod's report.
func (s *Store) Forget(uid types.UID) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byPod, uid)
}

// Len is the number of Pods with a report.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byPod)
}

// Overlay returns pod as the controller reads it: the Pod itself when
// nothing was reported for it, else a copy whose annotations say what its
// agent reported, where that is ahead of what the Pod carries. Only the
// annotations are copied: the rest is the cache's, read-only.
func (s *Store) Overlay(pod *corev1.Pod) *corev1.Pod {
	r, ok := s.Get(pod.UID)
	if !ok {
		return pod
	}
	return WithReport(pod, r)
}

// WithReport is Overlay for a given report.
func WithReport(pod *corev1.Pod, r protocol.Report) *corev1.Pod {
	out := *pod
	out.Annotations = make(map[string]string, len(pod.Annotations)+4)
	for k, v := range pod.Annotations {
		out.Annotations[k] = v
	}
	Merge(out.Annotations, r)
	out.Annotations[protocol.ReportedMark] = "true"
	return &out
}

// Merge writes a report into a Pod's annotations where it is ahead of
// them: epochs and counts only rise, so the higher of the two is the
// latest, whichever path it came by.
func Merge(annotations map[string]string, r protocol.Report) {
	if r.Epoch > annotated(annotations, jobset.EpochKey) {
		annotations[jobset.EpochKey] = protocol.Epoch(r.Epoch).String()
	}
	if r.WorkerRestarts > annotated(annotations, protocol.WorkerRestartsAnnotation) {
		annotations[protocol.WorkerRestartsAnnotation] = strconv.Itoa(int(r.WorkerRestarts))
	}
	if r.ReadyEpoch > annotated(annotations, protocol.ReadyEpochAnnotation) {
		annotations[protocol.ReadyEpochAnnotation] = protocol.Epoch(r.ReadyEpoch).String()
	}
	if e := r.WorkerExit; e != nil {
		cur, err := protocol.ParseWorkerExit(annotations[protocol.WorkerExitAnnotation])
		if err != nil || cur.Epoch < e.Epoch {
			annotations[protocol.WorkerExitAnnotation] = protocol.FormatWorkerExit(*e)
		}
	}
}

// annotated is the non-negative number an annotation holds, 0 if none.
func annotated(annotations map[string]string, key string) int32 {
	v, err := protocol.ParseEpoch(annotations[key])
	if err != nil {
		return 0
	}
	return int32(v)
}

// Held is what the controller holds of a Pod's agent: the report merged
// with the Pod's own annotations, which an agent that fell back wrote.
func Held(pod *corev1.Pod, r protocol.Report) protocol.Report {
	// Merge's rule, read without a copy of the annotations: a report
	// comes in for every agent after every restart.
	a := pod.Annotations
	held := protocol.Report{
		JobSet:         pod.Labels[jobset.JobSetNameKey],
		Epoch:          max(r.Epoch, annotated(a, jobset.EpochKey)),
		WorkerRestarts: max(r.WorkerRestarts, annotated(a, protocol.WorkerRestartsAnnotation)),
		ReadyEpoch:     max(r.ReadyEpoch, annotated(a, protocol.ReadyEpochAnnotation)),
		WorkerExit:     r.WorkerExit,
	}
	if e, err := protocol.ParseWorkerExit(a[protocol.WorkerExitAnnotation]); err == nil && (held.WorkerExit == nil || held.WorkerExit.Epoch <= e.Epoch) {
		held.WorkerExit = &e
	}
	return held
}
