package restartbench

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// endingWatches lists one JobSet and hands out the watches it is given, in
// order, one per call; it counts the lists and records the resource
// version each watch began from.
type endingWatches struct {
	listed  *jobset.JobSet
	watches chan *watch.FakeWatcher

	mu          sync.Mutex
	lists       int
	watchedFrom []string
}

func (l *endingWatches) List(metav1.ListOptions) (runtime.Object, error) {
	l.mu.Lock()
	l.lists++
	l.mu.Unlock()
	return &jobset.JobSetList{ListMeta: metav1.ListMeta{ResourceVersion: l.listed.ResourceVersion}, Items: []jobset.JobSet{*l.listed}}, nil
}

// Watch hands out the next watch; a watch asked for beyond them is an
// error, not a wait that would hang the test.
func (l *endingWatches) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	l.mu.Lock()
	l.watchedFrom = append(l.watchedFrom, opts.ResourceVersion)
	l.mu.Unlock()
	select {
	case w := <-l.watches:
		return w, nil
	default:
		return nil, errors.New("no more watches")
	}
}

func (l *endingWatches) calls() (lists int, watchedFrom []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lists, slices.Clone(l.watchedFrom)
}

func jobSetAt(version string, restarts int32) *jobset.JobSet {
	return &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "bench", ResourceVersion: version},
		Status:     jobset.JobSetStatus{Restarts: restarts},
	}
}

// A watch the API server ends must not leave the status stale: the JobSet
// is followed on the next watch, from where the first one ended, without a
// list.
func TestFollowJobSetWatchesAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// The first watch delivers a change and ends, as a watch whose timeout
	// passed does (one that ends without an event is taken for a failure,
	// and relisted after a backoff). The second is buffered: a follower
	// that never watched again must fail the test, not block it.
	first, second := watch.NewFakeWithChanSize(1, false), watch.NewFakeWithChanSize(1, false)
	first.Modify(jobSetAt("2", 0))
	first.Stop()
	lw := &endingWatches{listed: jobSetAt("1", 0), watches: make(chan *watch.FakeWatcher, 2)}
	lw.watches <- first
	lw.watches <- second
	jw, err := followJobSet(ctx, lw, "bench", "train")
	if err != nil {
		t.Fatal(err)
	}
	defer jw.stop()

	second.Modify(jobSetAt("3", 1))
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return jw.status().Restarts == 1, nil
	}); err != nil {
		t.Fatalf("the status after the first watch ended: %+v, want 1 restart: %v", jw.status(), err)
	}
	if at := jw.first(time.Time{}, func(s jobset.JobSetStatus) bool { return s.Restarts == 1 }); at.IsZero() {
		t.Error("the change on the second watch was not recorded")
	}
	lists, watchedFrom := lw.calls()
	if lists != 1 || !slices.Equal(watchedFrom, []string{"1", "2"}) {
		t.Errorf("%d lists, watches from resource versions %q; want 1 list, watches from \"1\" then \"2\"", lists, watchedFrom)
	}
	if got := jw.callsBetween(time.Time{}, time.Now()); got != 3 {
		t.Errorf("the follower counted %d lists and watches, want 3", got)
	}
	if got := jw.callsBetween(time.Now(), time.Now().Add(time.Hour)); got != 0 {
		t.Errorf("the follower counted %d lists and watches after they were made, want 0", got)
	}
}

// A list that keeps failing ends the follower's start with the failure's
// own error, not only the timeout's.
func TestFollowJobSetSaysWhyItDidNotSync(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: jobset.GroupVersion.Group, Resource: "jobsets"}, "", errors.New("no RBAC"))
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return nil, forbidden
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return nil, forbidden
		},
	}
	_, err := followJobSet(ctx, lw, "bench", "train")
	if !errors.Is(err, context.DeadlineExceeded) || !apierrors.IsForbidden(err) {
		t.Fatalf("error %v; want the deadline and the list's forbidden", err)
	}
}

func TestNotRunning(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase, states ...corev1.ContainerState) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase}}
		for _, s := range states {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "worker", State: s})
		}
		return p
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	deleting := pod("c", corev1.PodRunning, running)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for _, c := range []struct {
		name      string
		pods      []corev1.Pod
		wantN     int
		wantFirst string
	}{
		{"all running", []corev1.Pod{pod("a", corev1.PodRunning, running), pod("b", corev1.PodRunning, running)}, 0, ""},
		{"pending", []corev1.Pod{pod("a", corev1.PodRunning, running), pod("b", corev1.PodPending, waiting)}, 1, "b is Pending"},
		{"no phase", []corev1.Pod{pod("a", "")}, 1, "a is without a phase"},
		{"a worker waiting", []corev1.Pod{pod("a", corev1.PodRunning, waiting), pod("b", corev1.PodFailed)}, 2, "a has container worker not running"},
		{"deleting", []corev1.Pod{deleting}, 1, "c is being deleted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, first := notRunning(c.pods)
			if n != c.wantN || first != c.wantFirst {
				t.Errorf("notRunning = %d, %q; want %d, %q", n, first, c.wantN, c.wantFirst)
			}
		})
	}
}
