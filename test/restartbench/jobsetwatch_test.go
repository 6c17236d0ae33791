package restartbench

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// endingWatches lists one JobSet and hands out the watches it is given, in
// order, one per call.
type endingWatches struct {
	listed  *jobset.JobSet
	watches chan *watch.FakeWatcher
}

func (l *endingWatches) List(metav1.ListOptions) (runtime.Object, error) {
	return &jobset.JobSetList{ListMeta: metav1.ListMeta{ResourceVersion: l.listed.ResourceVersion}, Items: []jobset.JobSet{*l.listed}}, nil
}

// Watch hands out the next watch; a watch asked for beyond them is an
// error, not a wait that would hang the test.
func (l *endingWatches) Watch(metav1.ListOptions) (watch.Interface, error) {
	select {
	case w := <-l.watches:
		return w, nil
	default:
		return nil, errors.New("no more watches")
	}
}

// IsWatchListSemanticsUnSupported: the reflector lists, then watches, as
// it does for the benchmark's follower.
func (l *endingWatches) IsWatchListSemanticsUnSupported() bool { return true }

func jobSetAt(version string, restarts int32) *jobset.JobSet {
	return &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "bench", ResourceVersion: version},
		Status:     jobset.JobSetStatus{Restarts: restarts},
	}
}

// A watch the API server ends must not leave the status stale: the JobSet
// is followed on the next watch.
func TestFollowJobSetWatchesAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// The second is buffered: a follower that never watched again must fail
	// the test, not block it.
	first, second := watch.NewFake(), watch.NewFakeWithChanSize(1, false)
	lw := &endingWatches{listed: jobSetAt("1", 0), watches: make(chan *watch.FakeWatcher, 2)}
	lw.watches <- first
	lw.watches <- second
	jw, err := followJobSet(ctx, lw, "bench", "train")
	if err != nil {
		t.Fatal(err)
	}
	defer jw.stop()
	if got := jw.status().Restarts; got != 0 {
		t.Fatalf("restarts after the list: %d, want 0", got)
	}

	first.Stop() // the API server ends the watch
	second.Modify(jobSetAt("2", 1))
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return jw.status().Restarts == 1, nil
	}); err != nil {
		t.Fatalf("the status after the first watch ended: %+v, want 1 restart: %v", jw.status(), err)
	}
	if at := jw.first(time.Time{}, func(s jobset.JobSetStatus) bool { return s.Restarts == 1 }); at.IsZero() {
		t.Error("the change on the second watch was not recorded")
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
