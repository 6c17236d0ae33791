package state

import (
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
)

// expectationTimeout bounds how long a Job this controller created (or
// deleted) is expected to appear in the cache (or as deleted); past it the
// name is free to create again (a create that AlreadyExists then costs one
// refused request), the Job to delete again.
const expectationTimeout = time.Minute

// JobExpectations remembers, per JobSet, the Jobs this controller created
// or deleted that its cache does not show as such yet, as the Kubernetes Job
// controller's expectations do for Pods. Without them a reconcile that runs
// before the cache has caught up with the previous one's writes sends them
// again: a Recreate of 5,000 Jobs sent 7,503 creations, a third of them
// refused as existing, each a full trip through admission; and every Job of
// an earlier attempt would be deleted again until its deletion shows.
type JobExpectations struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]map[string]expectation
	// deleting holds, by UID, the Jobs deleted whose deletion the cache
	// does not show yet (neither gone nor carrying a deletionTimestamp).
	deleting map[types.NamespacedName]map[types.UID]expectation
	// terminating holds, by name, the UIDs of the JobSets whose namespace
	// refused a creation because it is being deleted. A namespace being
	// deleted never becomes active again and the JobSet goes with it, so
	// nothing is created for that JobSet any more: while the namespace
	// controller deletes the Jobs of a JobSet it has not deleted yet,
	// every reconcile would otherwise send all of them again (1,751
	// refused creations for a JobSet of 1,000 Jobs).
	terminating map[types.NamespacedName]types.UID
}

// expectation is a creation or deletion sent and not yet seen in the cache.
type expectation struct {
	uid  types.UID
	name string
	// owner is the JobSet's UID: a JobSet recreated under the same name
	// awaits none of its predecessor's Jobs.
	owner types.UID
	at    time.Time
}

// NewJobExpectations returns expectations that await nothing.
func NewJobExpectations() *JobExpectations {
	return &JobExpectations{
		pending:     map[types.NamespacedName]map[string]expectation{},
		deleting:    map[types.NamespacedName]map[types.UID]expectation{},
		terminating: map[types.NamespacedName]types.UID{},
	}
}

// Created records a Job created at now for the JobSet of UID owner.
func (e *JobExpectations) Created(key types.NamespacedName, owner types.UID, job *batchv1.Job, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	expect(e.pending, key, job.Name, expectation{uid: job.UID, name: job.Name, owner: owner, at: now})
}

// Unseen returns the names of the Jobs created for the JobSet of UID owner
// that the cache, read through cached (a Job by name, nil if none), does
// not hold yet, and forgets the others, those older than
// expectationTimeout and those of another JobSet of the name. It costs
// O(expectations), not O(Jobs).
func (e *JobExpectations) Unseen(key types.NamespacedName, owner types.UID, cached func(name string) *batchv1.Job, now time.Time) map[string]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.pending[key]) == 0 {
		return nil
	}
	return remaining(e.pending, key, owner, now, func(name string, x expectation) bool {
		job := cached(name)
		return job != nil && job.UID == x.uid
	})
}

// MarkTerminatingNamespace records that the namespace of the JobSet of UID
// owner refused a creation because it is being deleted.
func (e *JobExpectations) MarkTerminatingNamespace(key types.NamespacedName, owner types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.terminating[key] = owner
	delete(e.pending, key)
	delete(e.deleting, key)
}

// InTerminatingNamespace reports whether the JobSet of UID owner is in a
// namespace that refused a creation because it is being deleted.
func (e *JobExpectations) InTerminatingNamespace(key types.NamespacedName, owner types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	uid, ok := e.terminating[key]
	return ok && uid == owner
}

// Deleted records a Job of the JobSet of UID owner deleted at now.
func (e *JobExpectations) Deleted(key types.NamespacedName, owner types.UID, job *batchv1.Job, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	expect(e.deleting, key, job.UID, expectation{uid: job.UID, name: job.Name, owner: owner, at: now})
}

// Undeleted returns the UIDs of the Jobs deleted for the JobSet of UID
// owner that the cache, read through cached, still shows without a
// deletionTimestamp: their deletion is under way and is not sent again. It
// forgets the others, those older than expectationTimeout and those of
// another JobSet of the name.
func (e *JobExpectations) Undeleted(key types.NamespacedName, owner types.UID, cached func(name string) *batchv1.Job, now time.Time) map[types.UID]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.deleting[key]) == 0 {
		return nil
	}
	return remaining(e.deleting, key, owner, now, func(uid types.UID, x expectation) bool {
		job := cached(x.name)
		shown := job != nil && job.UID == uid && job.DeletionTimestamp == nil
		return !shown
	})
}

// expect records x under k among the JobSet's expectations in all.
func expect[K comparable](all map[types.NamespacedName]map[K]expectation, key types.NamespacedName, k K, x expectation) {
	if all[key] == nil {
		all[key] = map[K]expectation{}
	}
	all[key][k] = x
}

// remaining forgets, of the JobSet's expectations in all, those met says
// are met, those of another JobSet of the name (not owner) and those older
// than expectationTimeout, and returns the keys of the others.
func remaining[K comparable](all map[types.NamespacedName]map[K]expectation, key types.NamespacedName, owner types.UID, now time.Time, met func(K, expectation) bool) map[K]bool {
	pending := all[key]
	out := map[K]bool{}
	for k, x := range pending {
		if met(k, x) || x.owner != owner || now.Sub(x.at) > expectationTimeout {
			delete(pending, k)
			continue
		}
		out[k] = true
	}
	if len(pending) == 0 {
		delete(all, key)
	}
	return out
}

// Forget drops everything recorded for the JobSet key, once it is gone.
func (e *JobExpectations) Forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending, key)
	delete(e.deleting, key)
	delete(e.terminating, key)
}
