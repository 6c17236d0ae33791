package state

import (
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// ChildIndex holds the family of every JobSet whose children the cache
// holds, by namespace and JobSet UID (a JobSet recreated under the same
// name never sees its predecessor's children, and an object of another
// namespace that names the JobSet is not its child): Jobs by the UID of
// their controlling JobSet, Pods by their jobset-uid label.
//
// The Jobs' and Pods' event handlers feed it (JobEvent, PodEvent) before
// they enqueue the JobSet, on the informers' goroutines: a reconcile that
// an event enqueues always sees that event's object. controller-runtime
// starts the workers once the handlers have seen every object the
// informers listed, so the index is complete before the first reconcile;
// a JobSet's children that arrive before the JobSet do not wait for it.
// A delete seen only as a tombstone (the watch missed it) is a delete
// like any other: the handlers are given the last object known, and the
// index forgets the object by its key, in whichever family holds it.
//
// Locks: mu guards the map of families and where each object is counted;
// each family has its own lock, held by a handler for the O(1) update of
// one object and by a reconcile from observe to the end of decide. Only a
// handler that emptied a family takes mu while holding the family's lock,
// to drop it; nothing waits for a family's lock while holding mu.
type ChildIndex struct {
	mu       sync.Mutex
	families map[familyKey]*lockedFamily
	// owners says in which family each Job and Pod is counted.
	owners map[childKey]familyKey
}

// familyKey names a JobSet's family: its namespace and UID.
type familyKey struct {
	namespace string
	uid       types.UID
}

type lockedFamily struct {
	mu sync.Mutex
	*Family
	// dropped: the family emptied and left the index; a handler that
	// finds it so looks the family up again.
	dropped bool
}

type childKey struct {
	pod             bool
	namespace, name string
}

// NewChildIndex returns an empty index.
func NewChildIndex() *ChildIndex {
	return &ChildIndex{families: map[familyKey]*lockedFamily{}, owners: map[childKey]familyKey{}}
}

// JobEvent records a Job's creation, update or deletion (gone).
func (x *ChildIndex) JobEvent(job *batchv1.Job, gone bool) {
	var owner familyKey
	if !gone {
		owner = familyKey{job.Namespace, jobOwnerUID(job)}
	}
	x.update(childKey{namespace: job.Namespace, name: job.Name}, owner, func(f *Family) { f.setJob(job) }, func(f *Family) { f.deleteJob(job.Name) })
}

// PodEvent records a Pod's creation, update or deletion (gone).
func (x *ChildIndex) PodEvent(pod *corev1.Pod, gone bool) {
	x.PodEventWith(pod, gone, nil)
}

// PodEventWith is PodEvent with the Pod recorded as prepare makes it,
// under its family's lock, the lock RefreshPod takes: what prepare reads
// (a report) and a RefreshPod that follows a change of it are ordered, so
// neither records a Pod without the other's change.
func (x *ChildIndex) PodEventWith(pod *corev1.Pod, gone bool, prepare func(*corev1.Pod) *corev1.Pod) {
	var owner familyKey
	if !gone {
		owner = familyKey{pod.Namespace, types.UID(pod.Labels[jobset.JobSetUIDKey])}
	}
	set := func(f *Family) {
		if prepare != nil {
			f.setPod(prepare(pod))
			return
		}
		f.setPod(pod)
	}
	x.update(childKey{pod: true, namespace: pod.Namespace, name: pod.Name}, owner, set, func(f *Family) { f.deletePod(pod.Name) })
}

// RefreshPod replaces the Pod held under namespace/name, if it is the one
// of UID uid, by what refresh makes of it, and returns it; nil if no such
// Pod is held. It never adds a Pod: what is held is what the Pods' event
// handler recorded last, so a refresh that races the Pod's update or
// deletion builds on the newer Pod, or finds none.
func (x *ChildIndex) RefreshPod(namespace, name string, uid types.UID, refresh func(*corev1.Pod) *corev1.Pod) *corev1.Pod {
	x.mu.Lock()
	owner, counted := x.owners[childKey{pod: true, namespace: namespace, name: name}]
	x.mu.Unlock()
	if !counted {
		return nil
	}
	var out *corev1.Pod
	x.with(owner, false, func(f *Family) {
		p, ok := f.pods[name]
		if !ok || p.pod.UID != uid {
			return
		}
		out = refresh(p.pod)
		f.setPod(out)
	})
	return out
}

// update moves an object's contribution: out of the family it was counted
// in, if that is not owner's, and into owner's (none when owner has no
// UID).
func (x *ChildIndex) update(key childKey, owner familyKey, set, unset func(*Family)) {
	x.mu.Lock()
	was, counted := x.owners[key]
	if owner.uid == "" {
		delete(x.owners, key)
	} else {
		x.owners[key] = owner
	}
	x.mu.Unlock()
	if counted && was != owner {
		x.with(was, false, unset)
	}
	if owner.uid != "" {
		x.with(owner, true, set)
	}
}

// with runs fn on the family of uid under its lock, creating the family if
// create is set, and drops the family if fn left it empty.
func (x *ChildIndex) with(key familyKey, create bool, fn func(*Family)) {
	for {
		x.mu.Lock()
		f := x.families[key]
		if f == nil {
			if !create {
				x.mu.Unlock()
				return
			}
			f = &lockedFamily{Family: newFamily()}
			x.families[key] = f
		}
		x.mu.Unlock()

		f.mu.Lock()
		if f.dropped {
			f.mu.Unlock()
			continue
		}
		fn(f.Family)
		if f.empty() {
			x.mu.Lock()
			if x.families[key] == f {
				delete(x.families, key)
			}
			x.mu.Unlock()
			f.dropped = true
		}
		f.mu.Unlock()
		return
	}
}

// Lock returns the family of the JobSet of UID uid in namespace, locked
// and counted under view, and the function that unlocks it. A JobSet
// without children gets an empty family of its own: the index keeps only
// families with children.
func (x *ChildIndex) Lock(namespace string, uid types.UID, view *JobView) (*Family, func()) {
	x.mu.Lock()
	f := x.families[familyKey{namespace, uid}]
	x.mu.Unlock()
	if f == nil {
		fam := newFamily()
		fam.setView(view)
		return fam, func() {}
	}
	f.mu.Lock()
	f.setView(view)
	return f.Family, f.mu.Unlock
}

// jobOwnerUID is the UID of the JobSet that controls a Job; empty for any
// other Job.
func jobOwnerUID(o metav1.Object) types.UID {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.Kind == jobset.Kind && ref.APIVersion == jobset.GroupVersion.String() {
			return ref.UID
		}
	}
	return ""
}
