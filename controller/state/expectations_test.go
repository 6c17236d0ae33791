package state

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestJobCreationsUntilSeen(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "js"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	job := func(name, uid string) batchv1.Job {
		return batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
	}
	e := NewJobExpectations()
	if got := e.Unseen(key, "js-uid", cachedIn(), t0); len(got) != 0 {
		t.Fatalf("nothing created: unseen %v", got)
	}
	a, b := job("js-w-0", "uid-a"), job("js-w-1", "uid-b")
	e.Created(key, "js-uid", &a, t0)
	e.Created(key, "js-uid", &b, t0)

	// The cache shows a, and an older Job under b's name (being deleted):
	// b is still awaited, a no longer.
	old := job("js-w-1", "uid-old")
	if diff := cmp.Diff(map[string]bool{"js-w-1": true}, e.Unseen(key, "js-uid", cachedIn(a, old), t0.Add(time.Second))); diff != "" {
		t.Errorf("unseen (-want +got):\n%s", diff)
	}
	if got := e.Unseen(types.NamespacedName{Namespace: "ns", Name: "other"}, "other-uid", cachedIn(), t0); len(got) != 0 {
		t.Errorf("another JobSet: unseen %v", got)
	}
	// Never seen: free again after expectationTimeout.
	if got := e.Unseen(key, "js-uid", cachedIn(), t0.Add(expectationTimeout+time.Second)); len(got) != 0 {
		t.Errorf("after expectationTimeout: unseen %v", got)
	}

	// A JobSet recreated under the name awaits none of its predecessor's.
	e.Created(key, "js-uid", &a, t0)
	if got := e.Unseen(key, "new-uid", cachedIn(), t0); len(got) != 0 {
		t.Errorf("a new JobSet of the name: unseen %v", got)
	}
	e.Created(key, "js-uid", &a, t0)
	e.Forget(key)
	if got := e.Unseen(key, "js-uid", cachedIn(), t0); len(got) != 0 {
		t.Errorf("forgotten: unseen %v", got)
	}
}

func TestNamespaceTerminatingOnlyForThatJobSet(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "js"}
	e := NewJobExpectations()
	if e.InTerminatingNamespace(key, "js-uid") {
		t.Fatal("nothing refused yet: terminating")
	}
	e.MarkTerminatingNamespace(key, "js-uid")
	if !e.InTerminatingNamespace(key, "js-uid") {
		t.Error("after a refusal: not terminating")
	}
	// A JobSet of the same name in a namespace of the same name, created
	// again after the deletion: a new UID, a new namespace.
	if e.InTerminatingNamespace(key, "new-uid") {
		t.Error("a JobSet recreated under the name: terminating")
	}
	e.Forget(key)
	if e.InTerminatingNamespace(key, "js-uid") {
		t.Error("forgotten JobSet: terminating")
	}
}

func TestJobDeletionsUntilShown(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "js"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	job := func(name, uid string) batchv1.Job {
		return batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
	}
	a, b := job("js-w-0", "uid-a"), job("js-w-1", "uid-b")
	e := NewJobExpectations()
	if got := e.Undeleted(key, "js-uid", cachedIn(a, b), t0); len(got) != 0 {
		t.Fatalf("nothing deleted: undeleted %v", got)
	}
	e.Deleted(key, "js-uid", &a, t0)
	e.Deleted(key, "js-uid", &b, t0)

	// The cache shows a's deletion, not b's yet.
	shown := a.DeepCopy()
	shown.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	if diff := cmp.Diff(map[types.UID]bool{"uid-b": true}, e.Undeleted(key, "js-uid", cachedIn(*shown, b), t0.Add(time.Second))); diff != "" {
		t.Errorf("undeleted (-want +got):\n%s", diff)
	}
	// b gone from the cache: its deletion is seen.
	if got := e.Undeleted(key, "js-uid", cachedIn(*shown), t0.Add(time.Second)); len(got) != 0 {
		t.Errorf("b gone: undeleted %v", got)
	}
	// Never shown: deleted again after expectationTimeout; and a JobSet
	// recreated under the name expects none of its predecessor's.
	e.Deleted(key, "js-uid", &b, t0)
	if got := e.Undeleted(key, "new-uid", cachedIn(b), t0); len(got) != 0 {
		t.Errorf("a new JobSet of the name: undeleted %v", got)
	}
	e.Deleted(key, "js-uid", &b, t0)
	if got := e.Undeleted(key, "js-uid", cachedIn(b), t0.Add(expectationTimeout+time.Second)); len(got) != 0 {
		t.Errorf("after expectationTimeout: undeleted %v", got)
	}
}

// cachedIn reads Jobs by name from jobs, as the child index does.
func cachedIn(jobs ...batchv1.Job) func(string) *batchv1.Job {
	return func(name string) *batchv1.Job {
		for i := range jobs {
			if jobs[i].Name == name {
				return &jobs[i]
			}
		}
		return nil
	}
}
