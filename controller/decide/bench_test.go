package decide

import (
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/state"
)

// benchWorld is an InPlaceRestart JobSet of n Jobs of one Pod each (one
// replicated job, replicas n, parallelism 1), every Pod ready at the synced
// epoch 1: the steady state a reconcile finds between restarts.
type benchWorld struct {
	js   *jobset.JobSet
	jobs []*batchv1.Job
	pods []*corev1.Pod
	// broadcast is what the broadcast ConfigMap holds in that state.
	broadcast map[string]string
}

func newBenchWorld(tb testing.TB, n int) *benchWorld {
	tb.Helper()
	js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns", UID: "js-uid"}}
	js.Spec.ReplicatedJobs = []jobset.ReplicatedJob{{
		Name: "workers", Replicas: int32(n),
		Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "agent", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
					Env: []corev1.EnvVar{{Name: protocol.EnvRestartExitCode, Value: "88"}}}},
				Containers: []corev1.Container{{Name: "trainer"}},
			}},
		}},
	}}
	js.Spec.FailurePolicy = &jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 10}
	jobset.Default(js)
	js.Status.SyncedEpoch = 1

	w := &benchWorld{js: js}
	for i := range n {
		job := buildJob(js, 0, i, false, nil)
		job.UID = types.UID("job-uid-" + strconv.Itoa(i))
		job.ResourceVersion = "1"
		job.Status.Active, job.Status.Ready = 1, ptr.To[int32](1)
		w.jobs = append(w.jobs, job)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: job.Name + "-0", Namespace: js.Namespace, UID: types.UID("pod-uid-" + strconv.Itoa(i)), ResourceVersion: "1",
				Labels:      merged(job.Spec.Template.Labels, nil),
				Annotations: merged(job.Spec.Template.Annotations, map[string]string{jobset.EpochKey: "1"}),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
					Controller: ptr.To(true)}},
			},
			Spec: *job.Spec.Template.Spec.DeepCopy(),
			Status: corev1.PodStatus{
				Phase:                 corev1.PodRunning,
				Conditions:            []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "agent", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
				ContainerStatuses:     []corev1.ContainerStatus{{Name: "trainer", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
			},
		}
		w.pods = append(w.pods, pod)
	}

	// Settle the status and the broadcast: the state observed again must
	// decide nothing.
	p := Decide(js, w.observed(), t0, Timeouts{InPlaceRestart: time.Minute})
	js.Status, w.broadcast = p.Status, p.Broadcast
	if p := Decide(js, w.observed(), t0, Timeouts{InPlaceRestart: time.Minute}); len(p.CreateJobs)+len(p.DeleteJobs)+len(p.Events) != 0 || p.Broadcast != nil || NeedsWrite(js, js.Status, p.Status) {
		tb.Fatalf("the bench world is not steady: %d creations, %d deletions, %d events, broadcast %v", len(p.CreateJobs), len(p.DeleteJobs), len(p.Events), p.Broadcast)
	}
	return w
}

// observed is what the cache's reader hands observe: the Jobs and Pods by
// value, in one slice each (controller-runtime's List with
// UnsafeDisableDeepCopy copies each cached object's struct, not its
// contents, into the list).
func (w *benchWorld) observed() Observed {
	obs := Observed{Jobs: make([]batchv1.Job, len(w.jobs)), Pods: make([]corev1.Pod, len(w.pods)), ServiceExists: true, Broadcast: w.broadcast}
	for i, j := range w.jobs {
		obs.Jobs[i] = *j
	}
	for i, p := range w.pods {
		obs.Pods[i] = *p
	}
	return obs
}

// exitWorker returns a copy of the Pod at i whose worker exited with code 1.
func exitWorker(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.ResourceVersion = "2"
	pod.Status.ContainerStatuses[0].Ready = false
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}
	return pod
}

// index is the child index fed with the world's objects, as the informers'
// handlers feed it.
func (w *benchWorld) index() *state.ChildIndex {
	x := state.NewChildIndex()
	for _, j := range w.jobs {
		x.JobEvent(j, false)
	}
	for _, p := range w.pods {
		x.PodEvent(p, false)
	}
	return x
}

// reconcile reads and decides as Reconcile does: the JobSet's family from
// the index, under the JobSet's view, then decide.
func (w *benchWorld) reconcile(x *state.ChildIndex) Plan {
	fam, release := x.Lock(w.js.Namespace, w.js.UID, state.ViewOf(w.js))
	defer release()
	return Decide(w.js, Observed{Family: fam, ServiceExists: true, Broadcast: w.broadcast}, t0, Timeouts{InPlaceRestart: time.Minute})
}

// BenchmarkReconcileSteady measures what a reconcile of an unchanged
// JobSet of 5,000 Jobs and 5,000 Pods reads and decides.
func BenchmarkReconcileSteady(b *testing.B) {
	w := newBenchWorld(b, 5000)
	x := w.index()
	b.ReportAllocs()
	for b.Loop() {
		p := w.reconcile(x)
		if NeedsWrite(w.js, w.js.Status, p.Status) || len(p.CreateJobs)+len(p.DeleteJobs) != 0 || p.Broadcast != nil {
			b.Fatal("a steady JobSet's reconcile acts")
		}
	}
}

// BenchmarkReconcileWorkerExit measures a worker's exit in a synced JobSet
// of 5,000 Pods: the Pod's event, the reconcile that counts the restart,
// and the event that puts the Pod back for the next round.
func BenchmarkReconcileWorkerExit(b *testing.B) {
	w := newBenchWorld(b, 5000)
	x := w.index()
	running := w.pods[len(w.pods)/2]
	exited := exitWorker(running)
	b.ReportAllocs()
	for b.Loop() {
		x.PodEvent(exited, false)
		p := w.reconcile(x)
		if p.Status.InPlaceRestarts != w.js.Status.InPlaceRestarts+1 {
			b.Fatal("the worker's exit was not counted as a restart")
		}
		x.PodEvent(running, false)
	}
}

// BenchmarkReconcileFullScan measures the from-scratch path: the family
// built from whole lists, as after a resync, then decide.
func BenchmarkReconcileFullScan(b *testing.B) {
	w := newBenchWorld(b, 5000)
	b.ReportAllocs()
	for b.Loop() {
		Decide(w.js, w.observed(), t0, Timeouts{InPlaceRestart: time.Minute})
	}
}

// BenchmarkPodEvent measures one Pod update recorded in the index.
func BenchmarkPodEvent(b *testing.B) {
	w := newBenchWorld(b, 5000)
	x := w.index()
	running := w.pods[len(w.pods)/2]
	exited := exitWorker(running)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			x.PodEvent(exited, false)
		} else {
			x.PodEvent(running, false)
		}
	}
}

// BenchmarkRecount measures what a restart costs the index once: the
// JobSet's view changes and its 5,000 Jobs are counted again.
func BenchmarkRecount(b *testing.B) {
	w := newBenchWorld(b, 5000)
	x := w.index()
	restarted := w.js.DeepCopy()
	restarted.Status.Restarts++
	views := []*state.JobView{state.ViewOf(w.js), state.ViewOf(restarted)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_, release := x.Lock(w.js.Namespace, w.js.UID, views[i%2])
		release()
	}
}
