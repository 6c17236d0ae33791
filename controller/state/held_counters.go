package state

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// HeldCounters remembers, between a JobSet's reconciles, since when a
// change of its counters alone has been held back while it recovers from
// an in-place restart (controller/decide: HoldCounters), so that the hold
// is bounded. Memory, not status: a hold begun again after a manager
// restart costs at most the bound again. The zero value holds nothing and
// is ready to use.
type HeldCounters struct {
	mu    sync.Mutex
	since map[types.NamespacedName]heldRestart
}

// Wait returns how much longer the counters of the JobSet of UID owner may
// be held, up to bound from the first time they were (now, if this is
// it); 0: write them now.
func (h *HeldCounters) Wait(key types.NamespacedName, owner types.UID, now time.Time, bound time.Duration) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.since[key]
	if !ok || r.owner != owner {
		if h.since == nil {
			h.since = map[types.NamespacedName]heldRestart{}
		}
		r = heldRestart{owner: owner, since: now}
		h.since[key] = r
	}
	return max(0, bound-now.Sub(r.since))
}

// Forget ends the JobSet's hold: its status was written, or holds nothing.
func (h *HeldCounters) Forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.since, key)
}
