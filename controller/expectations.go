package controller

import (
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
)

// creationTimeout bounds how long a Job this controller created is
// expected to appear in the cache; past it the name is free to create
// again (a create that AlreadyExists then costs one refused request).
const creationTimeout = time.Minute

// jobCreations remembers, per JobSet, the Jobs this controller created that
// its cache has not shown yet, as the Kubernetes Job controller's
// expectations do for Pods. Without it a reconcile that runs before the
// cache has caught up with the previous one's creations sends them again:
// a Recreate of 5,000 Jobs sent 7,503 creations, a third of them refused
// as existing, each a full trip through admission.
type jobCreations struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]map[string]created
	// terminating holds, by name, the UIDs of the JobSets whose namespace
	// refused a creation because it is being deleted. A namespace being
	// deleted never becomes active again and the JobSet goes with it, so
	// nothing is created for that JobSet any more: while the namespace
	// controller deletes the Jobs of a JobSet it has not deleted yet,
	// every reconcile would otherwise send all of them again (1,751
	// refused creations for a JobSet of 1,000 Jobs).
	terminating map[types.NamespacedName]types.UID
}

type created struct {
	uid types.UID
	// owner is the JobSet's UID: a JobSet recreated under the same name
	// awaits none of its predecessor's Jobs.
	owner types.UID
	at    time.Time
}

func newJobCreations() *jobCreations {
	return &jobCreations{pending: map[types.NamespacedName]map[string]created{}, terminating: map[types.NamespacedName]types.UID{}}
}

// created records a Job created at now for the JobSet of UID owner.
func (e *jobCreations) created(key types.NamespacedName, owner types.UID, job *batchv1.Job, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending[key] == nil {
		e.pending[key] = map[string]created{}
	}
	e.pending[key][job.Name] = created{uid: job.UID, owner: owner, at: now}
}

// unseen returns the names of the Jobs created for the JobSet of UID owner
// that jobs, read from the cache, does not hold yet, and forgets the others,
// those older than creationTimeout and those of another JobSet of the name.
func (e *jobCreations) unseen(key types.NamespacedName, owner types.UID, jobs []batchv1.Job, now time.Time) map[string]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	pending := e.pending[key]
	if len(pending) == 0 {
		return nil
	}
	seen := make(map[types.UID]bool, len(jobs))
	for i := range jobs {
		seen[jobs[i].UID] = true
	}
	out := map[string]bool{}
	for name, c := range pending {
		if seen[c.uid] || c.owner != owner || now.Sub(c.at) > creationTimeout {
			delete(pending, name)
			continue
		}
		out[name] = true
	}
	if len(pending) == 0 {
		delete(e.pending, key)
	}
	return out
}

// markTerminatingNamespace records that the namespace of the JobSet of UID
// owner refused a creation because it is being deleted.
func (e *jobCreations) markTerminatingNamespace(key types.NamespacedName, owner types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.terminating[key] = owner
	delete(e.pending, key)
}

// inTerminatingNamespace reports whether the JobSet of UID owner is in a
// namespace that refused a creation because it is being deleted.
func (e *jobCreations) inTerminatingNamespace(key types.NamespacedName, owner types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	uid, ok := e.terminating[key]
	return ok && uid == owner
}

func (e *jobCreations) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending, key)
	delete(e.terminating, key)
}
