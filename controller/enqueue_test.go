package controller

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

func TestPodSignal(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: "1", Labels: map[string]string{jobset.JobSetNameKey: "js"}},
			Spec: corev1.PodSpec{InitContainers: []corev1.Container{{
				Name: "agent", Env: []corev1.EnvVar{{Name: protocol.EnvRestartExitCode, Value: "42"}},
			}}},
			Status: corev1.PodStatus{
				Phase:                 corev1.PodRunning,
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "agent"}},
				ContainerStatuses:     []corev1.ContainerStatus{{Name: "worker", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
			},
		}
	}
	waitOn := func(container int, init bool, reason string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			statuses := p.Status.ContainerStatuses
			if init {
				statuses = p.Status.InitContainerStatuses
			}
			statuses[container].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "pulling registry.example/agent:1"}}
		}
	}
	for _, tc := range []struct {
		name   string
		before func(*corev1.Pod) // of both the old Pod and the new one
		change func(*corev1.Pod)
		want   signal
	}{
		// The kubelet's image pull failures: the JobSet says so
		// (ImagePullFailure), batched.
		{"the agent cannot pull its image", nil, waitOn(0, true, "ErrImagePull"), ordinary},
		{"the agent's pull backs off", waitOn(0, true, "ErrImagePull"), waitOn(0, true, "ImagePullBackOff"), ordinary},
		{"the agent's image may never be pulled", nil, waitOn(0, true, "ErrImageNeverPull"), ordinary},
		{"a worker cannot pull its image", nil, waitOn(0, false, "ImagePullBackOff"), ordinary},
		{"the agent runs again", waitOn(0, true, "ImagePullBackOff"), func(p *corev1.Pod) {
			p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		}, ordinary},
		{"a worker exits with an error", nil, func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}
		}, urgent},
		{"the Pod fails", nil, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, urgent},
		{"the Pod is being deleted", nil, func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }, urgent},
		{"the agent restarts", nil, func(p *corev1.Pod) { p.Status.InitContainerStatuses[0].RestartCount = 1 }, urgent},
		{"an epoch is reported", nil, func(p *corev1.Pod) { p.Annotations = map[string]string{jobset.EpochKey: "2"} }, ordinary},
		{"a garbled epoch is reported", nil, func(p *corev1.Pod) { p.Annotations = map[string]string{jobset.EpochKey: "x"} }, ordinary},
		{"the Pod becomes ready", nil, func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}, ordinary},
		{"the informer resyncs", nil, func(p *corev1.Pod) { p.ResourceVersion = "1" }, ordinary},
		{"another annotation", nil, func(p *corev1.Pod) { p.Annotations = map[string]string{"example.com/note": "x"} }, ignored},
		{"a worker succeeds", nil, func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
		}, ignored},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, cur := base(), base()
			if tc.before != nil {
				tc.before(old)
				tc.before(cur)
			}
			cur.ResourceVersion = "2"
			tc.change(cur)
			if got := podSignal(old, cur); got != tc.want {
				t.Errorf("signal %d, want %d", got, tc.want)
			}
		})
	}
}

func TestJobSignal(t *testing.T) {
	base := func() *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "js-w-0", ResourceVersion: "1"},
			Spec:       batchv1.JobSpec{Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2)},
			Status:     batchv1.JobStatus{Active: 2, Ready: ptr.To[int32](1)},
		}
	}
	condition := func(t batchv1.JobConditionType) func(*batchv1.Job) {
		return func(j *batchv1.Job) {
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue})
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*batchv1.Job)
		want   signal
	}{
		{"the Job fails", condition(batchv1.JobFailed), urgent},
		{"the Job is failing", condition(batchv1.JobFailureTarget), urgent},
		{"the Job completes", condition(batchv1.JobComplete), urgent},
		{"the Job is being deleted", func(j *batchv1.Job) { j.DeletionTimestamp = ptr.To(metav1.Now()) }, urgent},
		{"the Job becomes ready", func(j *batchv1.Job) { j.Status.Ready = ptr.To[int32](2) }, readiness},
		{"a counter moves", func(j *batchv1.Job) { j.Status.Active = 1 }, ordinary},
		{"the Job is resumed", func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) }, ordinary},
		{"the informer resyncs", func(j *batchv1.Job) { j.ResourceVersion = "1" }, ordinary},
		{"an annotation", func(j *batchv1.Job) { j.Annotations = map[string]string{"example.com/note": "x"} }, ignored},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, cur := base(), base()
			cur.ResourceVersion = "2"
			tc.change(cur)
			if got := jobSignal(old, cur); got != tc.want {
				t.Errorf("signal %d, want %d", got, tc.want)
			}
		})
	}
}

// jobSetPod is a Pod of the JobSet ns/js at resource version rv, changed
// by mutate.
func jobSetPod(rv string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: rv, Labels: map[string]string{jobset.JobSetNameKey: "js"}}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// recordingQueue records how the handler enqueues.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	now   []reconcile.Request
	after map[reconcile.Request]time.Duration
}

func (q *recordingQueue) Add(r reconcile.Request) { q.now = append(q.now, r) }
func (q *recordingQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.after[r] = d
}

func TestBatchedHandler(t *testing.T) {
	const period = 250 * time.Millisecond
	h := batched(period, jobSetOfPod, podSignal, nil, nil)
	ctx := context.Background()
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "js"}}
	pod := jobSetPod

	q := &recordingQueue{after: map[reconcile.Request]time.Duration{}}
	h.Create(ctx, ctrlevent.CreateEvent{Object: pod("1", nil)}, q)
	h.Update(ctx, ctrlevent.UpdateEvent{ObjectOld: pod("1", nil), ObjectNew: pod("2", func(p *corev1.Pod) {
		p.Annotations = map[string]string{jobset.EpochKey: "1"}
	})}, q)
	if len(q.now) != 0 || q.after[key] != period {
		t.Errorf("a creation and an epoch reported: at once %v, after %v; want only after %v", q.now, q.after, period)
	}

	q = &recordingQueue{after: map[reconcile.Request]time.Duration{}}
	h.Update(ctx, ctrlevent.UpdateEvent{ObjectOld: pod("1", nil), ObjectNew: pod("2", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })}, q)
	h.Delete(ctx, ctrlevent.DeleteEvent{Object: pod("2", nil)}, q)
	if len(q.now) != 2 || len(q.after) != 0 {
		t.Errorf("a failure and a deletion: at once %v, after %v; want both at once", q.now, q.after)
	}

	q = &recordingQueue{after: map[reconcile.Request]time.Duration{}}
	h.Update(ctx, ctrlevent.UpdateEvent{ObjectOld: pod("1", nil), ObjectNew: pod("2", func(p *corev1.Pod) {
		p.Annotations = map[string]string{"example.com/note": "x"}
	})}, q)
	orphan := pod("1", func(p *corev1.Pod) { p.Labels = nil })
	h.Delete(ctx, ctrlevent.DeleteEvent{Object: orphan}, q)
	if len(q.now)+len(q.after) != 0 {
		t.Errorf("an unrelated change and a Pod of no JobSet enqueued %v %v", q.now, q.after)
	}
}

func TestJobSetOfJob(t *testing.T) {
	js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns", UID: "u"}}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "js-w-0", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, jobset.GroupVersion.WithKind(jobset.Kind))}}}
	if key, ok := jobSetOfJob(job); !ok || key != (types.NamespacedName{Namespace: "ns", Name: "js"}) {
		t.Errorf("a JobSet's Job: %v %v", key, ok)
	}
	job.OwnerReferences[0].Kind = "CronJob"
	if _, ok := jobSetOfJob(job); ok {
		t.Errorf("a Job another kind controls maps to a JobSet")
	}
}

// While the JobSet restarts in place, the failures the restart itself
// causes are batched; deletions are not.
func TestBatchedHandlerDuringAnInPlaceRestart(t *testing.T) {
	const period = 100 * time.Millisecond
	h := batched(period, jobSetOfPod, podSignal, func(types.NamespacedName) jobSetState { return jobSetState{inPlace: true, restarting: true} }, nil)
	ctx := context.Background()
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "js"}}
	pod := jobSetPod
	q := &recordingQueue{after: map[reconcile.Request]time.Duration{}}
	h.Update(ctx, ctrlevent.UpdateEvent{ObjectOld: pod("1", nil), ObjectNew: pod("2", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })}, q)
	if len(q.now) != 0 || q.after[key] != period {
		t.Errorf("a failure during the restart: at once %v, after %v; want batched", q.now, q.after)
	}
	h.Delete(ctx, ctrlevent.DeleteEvent{Object: pod("2", nil)}, q)
	if len(q.now) != 1 {
		t.Errorf("a deletion during the restart: at once %v; want at once", q.now)
	}
}

// A Job's readiness gates the startup order and ends a recreation, so it
// is reconciled at once; a JobSet that restarts in place only counts it,
// and its N Jobs ready again after a restart are batched.
func TestBatchedHandlerReadiness(t *testing.T) {
	const period = 100 * time.Millisecond
	js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns", UID: "u"}}
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "js"}}
	job := func(rv string, ready int32) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "js-w-0", Namespace: "ns", ResourceVersion: rv,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, jobset.GroupVersion.WithKind(jobset.Kind))}},
			Spec:   batchv1.JobSpec{Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1)},
			Status: batchv1.JobStatus{Active: 1, Ready: ptr.To(ready)},
		}
	}
	for name, tc := range map[string]struct {
		state   jobSetState
		wantNow bool
	}{
		"a JobSet that recreates its Jobs: at once": {state: jobSetState{}, wantNow: true},
		"a JobSet that restarts in place: batched":  {state: jobSetState{inPlace: true}, wantNow: false},
	} {
		t.Run(name, func(t *testing.T) {
			h := batched(period, jobSetOfJob, jobSignal, func(types.NamespacedName) jobSetState { return tc.state }, nil)
			q := &recordingQueue{after: map[reconcile.Request]time.Duration{}}
			h.Update(context.Background(), ctrlevent.UpdateEvent{ObjectOld: job("1", 0), ObjectNew: job("2", 1)}, q)
			if gotNow := len(q.now) == 1; gotNow != tc.wantNow || (!tc.wantNow && q.after[key] != period) {
				t.Errorf("a Job ready: at once %v, after %v; want at once: %v", q.now, q.after, tc.wantNow)
			}
		})
	}
}
