package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// statusCoalescing is the least time between two status writes of a
// JobSet that change nothing but its replicated jobs' counters.
const statusCoalescing = time.Second

// countersOnly reports whether two statuses differ only in the replicated
// jobs' counters (ready, active, succeeded, failed, suspended).
func countersOnly(a, b jobset.JobSetStatus) bool {
	a.ReplicatedJobsStatus, b.ReplicatedJobsStatus = nil, nil
	return equality.Semantic.DeepEqual(a, b)
}

// inPlaceRestarting reports whether an in-place restart is under way: an
// epoch deprecated and the next not yet synced.
func inPlaceRestarting(s jobset.JobSetStatus) bool {
	return s.SyncedEpoch > 0 && s.DeprecatedEpoch >= s.SyncedEpoch
}

// statusWrites remembers when each JobSet's status was last written. A
// JobSet recreated under the same name inherits the time, which delays its
// first counter-only write by at most statusCoalescing.
type statusWrites struct {
	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

func newStatusWrites() *statusWrites {
	return &statusWrites{last: map[types.NamespacedName]time.Time{}}
}

// wait is how long a counters-only write of the JobSet must still wait.
func (w *statusWrites) wait(key types.NamespacedName, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[key]
	if !ok {
		return 0
	}
	return max(0, last.Add(statusCoalescing).Sub(now))
}

func (w *statusWrites) wrote(key types.NamespacedName, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last[key] = now
}

func (w *statusWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, key)
}
