package reconciler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
)

// ReadyTracker says when a starting replica has loaded every JobSetPolicy
// that existed when its cache synced, as Gatekeeper's readiness tracker
// does for its constraints. Until then its webhooks must not admit: the
// webhook server answers as soon as the process starts, and a JobSet
// admitted before the admins' policies are compiled is admitted
// unguarded. Once ready, a replica stays ready: a policy created later is
// a change like any other.
type ReadyTracker struct {
	// Reader lists the policies; the manager's cache, which is synced
	// when the tracker starts.
	Reader client.Reader

	mu       sync.Mutex
	listed   bool
	waiting  map[string]bool
	observed map[string]bool
	// ready latches listed && len(waiting) == 0, read without the lock
	// by every admission request.
	ready atomic.Bool
}

var _ manager.LeaderElectionRunnable = &ReadyTracker{}

// NeedLeaderElection: every replica serves the webhooks.
func (t *ReadyTracker) NeedLeaderElection() bool { return false }

// Start lists the policies once, after the caches synced.
func (t *ReadyTracker) Start(ctx context.Context) error {
	var list policyv1alpha1.JobSetPolicyList
	if err := t.Reader.List(ctx, &list); err != nil {
		return fmt.Errorf("listing the JobSetPolicies to load before admitting: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.waiting = map[string]bool{}
	for _, p := range list.Items {
		if !t.observed[p.Name] {
			t.waiting[p.Name] = true
		}
	}
	t.observed, t.listed = nil, true
	t.ready.Store(len(t.waiting) == 0)
	return nil
}

// Observed records that the reconciler has decided what of the policy is
// in force (the version that compiled, the last good one, or nothing).
func (t *ReadyTracker) Observed(name string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ready.Load() {
		return
	}
	if !t.listed {
		if t.observed == nil {
			t.observed = map[string]bool{}
		}
		t.observed[name] = true
		return
	}
	delete(t.waiting, name)
	t.ready.Store(len(t.waiting) == 0)
}

// Ready reports whether every policy listed at start is loaded.
func (t *ReadyTracker) Ready() bool { return t.ready.Load() }

// Check is the tracker as a readyz check.
func (t *ReadyTracker) Check(*http.Request) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.ready.Load():
		return nil
	case !t.listed:
		return errors.New("the JobSetPolicies are not listed yet")
	}
	return fmt.Errorf("%d JobSetPolicies not loaded yet", len(t.waiting))
}
