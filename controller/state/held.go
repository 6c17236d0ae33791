package state

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// HeldRestarts remembers, between a JobSet's reconciles, when its in-place
// restart was first held back for a fatal exit to be reported
// (controller/decide: Plan.RestartHeldSince, handed back as
// Observed.RestartHeldSince). Memory, not status: a hold begun again after
// a manager restart costs at most the settle again. The zero value holds
// nothing and is ready to use.
type HeldRestarts struct {
	mu    sync.Mutex
	since map[types.NamespacedName]heldRestart
}

type heldRestart struct {
	// owner is the JobSet's UID: a JobSet recreated under the same name
	// holds none of its predecessor's restarts.
	owner types.UID
	since time.Time
}

// Since is when the in-place restart of the JobSet of UID owner was first
// held back; zero if none is.
func (h *HeldRestarts) Since(key types.NamespacedName, owner types.UID) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r, ok := h.since[key]; ok && r.owner == owner {
		return r.since
	}
	return time.Time{}
}

// Record records since for the JobSet of UID owner; zero forgets it.
func (h *HeldRestarts) Record(key types.NamespacedName, owner types.UID, since time.Time) {
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
func (h *HeldRestarts) Forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.since, key)
}
