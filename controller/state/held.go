package state

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Holds remembers, between a JobSet's reconciles, since when something of
// it has been held back: its in-place restart, for a fatal exit to be
// reported (controller/decide: Plan.RestartHeldSince, handed back as
// Observed.RestartHeldSince), or a write of its counters alone while it
// recovers from an in-place restart (decide.HoldCounters). Memory, not
// status: a hold begun again after a manager restart costs at most its
// bound again. The zero value holds nothing and is ready to use.
type Holds struct {
	mu    sync.Mutex
	since map[types.NamespacedName]heldRestart
}

type heldRestart struct {
	// owner is the JobSet's UID: a JobSet recreated under the same name
	// holds none of its predecessor's holds.
	owner types.UID
	since time.Time
}

// Since is when the JobSet of UID owner was first held back; zero if it
// is not.
func (h *Holds) Since(key types.NamespacedName, owner types.UID) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r, ok := h.since[key]; ok && r.owner == owner {
		return r.since
	}
	return time.Time{}
}

// Record records since for the JobSet of UID owner; zero forgets it.
func (h *Holds) Record(key types.NamespacedName, owner types.UID, since time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if since.IsZero() {
		delete(h.since, key)
		return
	}
	if h.since == nil {
		h.since = map[types.NamespacedName]heldRestart{}
	}
	h.since[key] = heldRestart{owner, since}
}

// Forget drops what is held for the JobSet key, once it is gone.
func (h *Holds) Forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.since, key)
}
