package state_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/decide"
	"github.com/inplace-dev/inplace/controller/internal/testutil"
	"github.com/inplace-dev/inplace/controller/state"
)

// randomWorld makes random Jobs, Pods and JobSet views, mostly valid and
// sometimes not: labels that are no number, of no replicated job, of
// another attempt; Pods that move between JobSets.
type randomWorld struct {
	r    *rand.Rand
	uids []types.UID
	gen  int
}

func (w *randomWorld) pick(options ...string) string { return options[w.r.IntN(len(options))] }

// namespace is mostly the JobSets' own; an object of another namespace
// that names a JobSet is none of its children.
func (w *randomWorld) namespace() string { return w.pick("ns", "ns", "ns", "ns", "other") }

func keyOf(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }

func (w *randomWorld) jobSet(uid types.UID) *jobset.JobSet {
	js := testutil.JobSet("a", 1+w.r.IntN(3), "b", 1+w.r.IntN(2))
	js.UID = uid
	js.Status.Restarts = int32(w.r.IntN(2))
	if w.r.IntN(3) == 0 {
		js.Status.ReplicatedJobsStatus = []jobset.ReplicatedJobStatus{{Name: "a", JobRestarts: []int32{0, int32(w.r.IntN(2)), 1}}}
	}
	switch w.r.IntN(3) {
	case 0:
		js.Spec.FailurePolicy = &jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 1}
		js.Status.SyncedEpoch = int32(w.r.IntN(3))
		js.Status.DeprecatedEpoch = int32(w.r.IntN(int(js.Status.SyncedEpoch) + 1))
		js.Spec.ReplicatedJobs[0].Template.Spec.PodFailurePolicy = testutil.FailJobOn(2)
	case 1:
		js.Spec.FailurePolicy = &jobset.FailurePolicy{RestartStrategy: jobset.BlockingRecreate}
	}
	if w.r.IntN(4) == 0 {
		js.Spec.StartupPolicy = &jobset.StartupPolicy{StartupPolicyOrder: jobset.InOrder}
	}
	return js
}

func (w *randomWorld) job() *batchv1.Job {
	w.gen++
	rj := w.pick("a", "a", "b", "c")
	index := w.pick("0", "1", "2", "x")
	name := "js-" + rj + "-" + index
	if w.r.IntN(8) == 0 {
		name = "js-" + rj + "-" + w.pick("0", "1", "2") // a name that is not its index's
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: w.namespace(), UID: types.UID(fmt.Sprintf("job-%d", w.gen)),
		Labels: map[string]string{
			jobset.ReplicatedJobNameKey: rj,
			jobset.JobIndexKey:          index,
			jobset.RestartsKey:          w.pick("0", "0", "1", "01"),
			jobset.JobRestartAttemptKey: w.pick("0", "0", "1"),
		},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: jobset.GroupVersion.String(), Kind: jobset.Kind, Name: "js",
			UID: w.uids[w.r.IntN(len(w.uids))], Controller: ptr.To(true)}},
	}}
	if w.r.IntN(8) == 0 {
		// Made by upstream JobSet before it restarted Jobs alone.
		delete(job.Labels, jobset.JobRestartAttemptKey)
	}
	if w.r.IntN(6) == 0 {
		job.DeletionTimestamp = ptr.To(testutil.T0)
	}
	for _, t := range []batchv1.JobConditionType{batchv1.JobFailed, batchv1.JobComplete, batchv1.JobFailureTarget} {
		if w.r.IntN(6) == 0 {
			job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue})
		}
	}
	job.Spec.Suspend = []*bool{nil, ptr.To(true), ptr.To(false)}[w.r.IntN(3)]
	job.Spec.Parallelism = []*int32{nil, ptr.To[int32](1), ptr.To[int32](2)}[w.r.IntN(3)]
	job.Spec.Completions = []*int32{nil, ptr.To[int32](1), ptr.To[int32](2)}[w.r.IntN(3)]
	job.Status.Active = int32(w.r.IntN(3))
	job.Status.Ready = []*int32{nil, ptr.To[int32](0), ptr.To[int32](2)}[w.r.IntN(3)]
	return job
}

func (w *randomWorld) pod() *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p" + strconv.Itoa(w.r.IntN(10)), Namespace: w.namespace(),
			Labels: map[string]string{
				jobset.ReplicatedJobNameKey: w.pick("a", "b"),
				jobset.RestartsKey:          w.pick("0", "0", "1"),
				jobset.JobSetUIDKey:         string(w.uids[w.r.IntN(len(w.uids))]),
			},
			Annotations: map[string]string{},
		},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "agent", Env: []corev1.EnvVar{{Name: protocol.EnvRestartExitCode, Value: "88"}}}}},
		Status: corev1.PodStatus{
			Phase:                 corev1.PodPhase(w.pick(string(corev1.PodRunning), string(corev1.PodRunning), string(corev1.PodFailed))),
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "agent", RestartCount: int32(w.r.IntN(3))}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "trainer", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		},
	}
	if w.r.IntN(10) == 0 {
		delete(pod.Labels, jobset.JobSetUIDKey)
	}
	if epoch := w.pick("", "1", "1", "2", "x"); epoch != "" {
		pod.Annotations[jobset.EpochKey] = epoch
	}
	if w.r.IntN(5) == 0 {
		pod.Annotations[jobset.InPlaceRestartAttemptKey] = w.pick("0", "1", "-1")
	}
	if w.r.IntN(4) == 0 {
		pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(w.r.IntN(3))}}
	}
	if w.r.IntN(2) == 0 {
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	if w.r.IntN(8) == 0 {
		pod.DeletionTimestamp = ptr.To(testutil.T0)
	}
	return pod
}

// TestChildIndexEqualsAFullScan applies random sequences of creations,
// updates, deletions (some seen only as a tombstone's stale object) and
// changes of the JobSets' views to the child index, and after each
// compares every family's running totals with the totals computed from
// scratch from the objects the cache would hold. A decision taken on the
// index must also be the one taken on whole lists.
func TestChildIndexEqualsAFullScan(t *testing.T) {
	seeds := uint64(15)
	if testing.Short() {
		seeds = 5
	}
	for seed := range seeds {
		w := &randomWorld{r: rand.New(rand.NewPCG(seed, 22)), uids: []types.UID{"uid-1", "uid-2"}}
		x := state.NewChildIndex()
		jobs := map[string]*batchv1.Job{}
		pods := map[string]*corev1.Pod{}
		views := map[types.UID]*jobset.JobSet{}
		for _, uid := range w.uids {
			views[uid] = w.jobSet(uid)
		}
		for step := range 200 {
			switch op := w.r.IntN(10); {
			case op < 4:
				job := w.job()
				jobs[keyOf(job)] = job
				x.JobEvent(job, false)
			case op < 5:
				job := w.job()
				if old, ok := jobs[keyOf(job)]; ok {
					delete(jobs, keyOf(job))
					// Deleted while the informer was away: the tombstone
					// holds a stale state, or the last one.
					if w.r.IntN(2) == 0 {
						old = job
					}
					x.JobEvent(old, true)
				}
			case op < 8:
				pod := w.pod()
				pods[keyOf(pod)] = pod
				x.PodEvent(pod, false)
			case op < 9:
				pod := w.pod()
				if old, ok := pods[keyOf(pod)]; ok {
					delete(pods, keyOf(pod))
					if w.r.IntN(2) == 0 {
						old = pod
					}
					x.PodEvent(old, true)
				}
			default:
				uid := w.uids[w.r.IntN(len(w.uids))]
				views[uid] = w.jobSet(uid)
			}

			for _, uid := range w.uids {
				js := views[uid]
				// The JobSet's children: in its namespace, and its own.
				mine := func(o metav1.Object, owner types.UID) bool { return o.GetNamespace() == "ns" && owner == uid }
				ownJobs, ownPods := map[string]*batchv1.Job{}, map[string]*corev1.Pod{}
				var jobList []batchv1.Job
				var podList []corev1.Pod
				for _, job := range jobs {
					if mine(job, state.JobOwnerUID(job)) {
						ownJobs[job.Name] = job
						jobList = append(jobList, *job)
					}
				}
				for _, pod := range pods {
					if mine(pod, types.UID(pod.Labels[jobset.JobSetUIDKey])) {
						ownPods[pod.Name] = pod
						podList = append(podList, *pod)
					}
				}
				want := state.CountedFromScratch(js, ownJobs, ownPods)
				fam, release := x.Lock("ns", uid, state.ViewOf(js))
				got := state.CountedOf(fam)
				if diff := cmp.Diff(want, got, cmp.AllowUnexported(state.JobCounts{})); diff != "" {
					release()
					t.Fatalf("seed %d step %d, JobSet %s: running totals differ from a full scan (-scan +index):\n%s", seed, step, uid, diff)
				}
				viaIndex := decide.Decide(js, decide.Observed{Family: fam}, testutil.T0, decide.Timeouts{InPlaceRestart: time.Minute})
				release()
				viaLists := decide.Decide(js, decide.Observed{Jobs: jobList, Pods: podList}, testutil.T0, decide.Timeouts{InPlaceRestart: time.Minute})
				if diff := cmp.Diff(summaryOf(viaLists), summaryOf(viaIndex), cmp.AllowUnexported(decide.Event{})); diff != "" {
					t.Fatalf("seed %d step %d, JobSet %s: decisions differ (-lists +index):\n%s", seed, step, uid, diff)
				}
			}
		}
	}
}

// planSummary is what a plan decides, comparably.
type planSummary struct {
	Status                          jobset.JobSetStatus
	Create, Delete, Suspend, Resume []string
	Events, Warnings                []decide.Event
	DeleteJobSet                    bool
	RequeueAfter                    time.Duration
	Broadcast                       map[string]string
}

func summaryOf(p decide.Plan) planSummary {
	var resume []string
	for _, u := range p.ResumeJobs {
		resume = append(resume, u.Cached.Name)
	}
	return planSummary{
		Status: p.Status, Create: testutil.Names(p.CreateJobs), Delete: testutil.Names(p.DeleteJobs), Suspend: testutil.Names(p.SuspendJobs), Resume: resume,
		Events: p.Events, Warnings: p.Warnings, DeleteJobSet: p.DeleteJobSet, RequeueAfter: p.RequeueAfter, Broadcast: p.Broadcast,
	}
}

// jobOf is the Job at index of replicated job rj that the first decision
// on js creates.
func jobOf(js *jobset.JobSet, rj string, index int) *batchv1.Job {
	name := state.JobName(js.Name, rj, index)
	for _, job := range decide.Decide(js, decide.Observed{}, testutil.T0, decide.Timeouts{InPlaceRestart: time.Minute}).CreateJobs {
		if job.Name == name {
			return job
		}
	}
	panic("no Job " + name)
}

// A family that emptied leaves the index; the next event makes a new one.
func TestChildIndexDropsEmptyFamilies(t *testing.T) {
	x := state.NewChildIndex()
	js := testutil.JobSet("a", 1)
	job := jobOf(js, "a", 0)
	x.JobEvent(job, false)
	if families, _ := x.Sizes(); families != 1 {
		t.Fatalf("families %d after a Job, want 1", families)
	}
	x.JobEvent(job, true)
	if families, owners := x.Sizes(); families != 0 || owners != 0 {
		t.Errorf("families %d, owners %d after the Job's deletion, want none", families, owners)
	}
	x.JobEvent(job, false)
	fam, release := x.Lock(js.Namespace, js.UID, state.ViewOf(js))
	defer release()
	if got := state.CountedOf(fam).RJs["a"].Unfinished; got != 1 {
		t.Errorf("the Job created again: %d unfinished, want 1", got)
	}
}

// The Jobs' and Pods' handlers run on their informers' goroutines while
// reconciles read the families on theirs: under the race detector, this
// test has them all at once, then compares the totals with a full scan.
func TestChildIndexConcurrentEventsAndReconciles(t *testing.T) {
	w := &randomWorld{r: rand.New(rand.NewPCG(1, 2)), uids: []types.UID{"uid-1", "uid-2"}}
	var jobs []*batchv1.Job
	var pods []*corev1.Pod
	for range 300 {
		jobs = append(jobs, w.job())
		pods = append(pods, w.pod())
	}
	views := map[types.UID]*jobset.JobSet{"uid-1": w.jobSet("uid-1"), "uid-2": w.jobSet("uid-2")}
	x := state.NewChildIndex()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			for _, uid := range w.uids {
				fam, release := x.Lock("ns", uid, state.ViewOf(views[uid]))
				decide.Decide(views[uid], decide.Observed{Family: fam}, testutil.T0, decide.Timeouts{InPlaceRestart: time.Minute})
				release()
			}
		}
	}()
	finalJobs, finalPods := map[string]*batchv1.Job{}, map[string]*corev1.Pod{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, job := range jobs {
			x.JobEvent(job, false)
		}
	})
	wg.Go(func() {
		for _, pod := range pods {
			x.PodEvent(pod, false)
		}
	})
	wg.Wait()
	<-done
	for _, job := range jobs {
		finalJobs[keyOf(job)] = job
	}
	for _, pod := range pods {
		finalPods[keyOf(pod)] = pod
	}
	for _, uid := range w.uids {
		ownJobs, ownPods := map[string]*batchv1.Job{}, map[string]*corev1.Pod{}
		for _, job := range finalJobs {
			if job.Namespace == "ns" && state.JobOwnerUID(job) == uid {
				ownJobs[job.Name] = job
			}
		}
		for _, pod := range finalPods {
			if pod.Namespace == "ns" && types.UID(pod.Labels[jobset.JobSetUIDKey]) == uid {
				ownPods[pod.Name] = pod
			}
		}
		fam, release := x.Lock("ns", uid, state.ViewOf(views[uid]))
		got := state.CountedOf(fam)
		release()
		if diff := cmp.Diff(state.CountedFromScratch(views[uid], ownJobs, ownPods), got, cmp.AllowUnexported(state.JobCounts{})); diff != "" {
			t.Errorf("JobSet %s: running totals differ from a full scan (-scan +index):\n%s", uid, diff)
		}
	}
}

// A report refreshes the Pod the handlers recorded last, and never brings
// back one whose deletion they recorded, nor adds one they did not see.
func TestChildIndexRefreshPodBuildsOnTheHandlersPod(t *testing.T) {
	x := state.NewChildIndex()
	newer := func(name string, p *corev1.Pod) *corev1.Pod {
		out := p.DeepCopy()
		out.Annotations[jobset.EpochKey] = name
		return out
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "pod-1",
		Labels: map[string]string{jobset.JobSetUIDKey: "uid-1"}, Annotations: map[string]string{}}}
	if got := x.RefreshPod("ns", "p", "pod-1", func(p *corev1.Pod) *corev1.Pod { return newer("2", p) }); got != nil {
		t.Errorf("a Pod never recorded was refreshed: %v", got.Annotations)
	}
	if families, owners := x.Sizes(); families != 0 || owners != 0 {
		t.Errorf("refreshing a Pod never recorded added %d families, %d owners", families, owners)
	}

	x.PodEvent(pod, false)
	updated := pod.DeepCopy()
	updated.Labels["updated"] = "true"
	x.PodEvent(updated, false)
	got := x.RefreshPod("ns", "p", "pod-1", func(p *corev1.Pod) *corev1.Pod { return newer("2", p) })
	if got == nil || got.Labels["updated"] != "true" || got.Annotations[jobset.EpochKey] != "2" {
		t.Errorf("refreshed %v: want the Pod of the last update, at epoch 2", got)
	}
	if got := x.RefreshPod("ns", "p", "another-pod", func(p *corev1.Pod) *corev1.Pod { return newer("3", p) }); got != nil {
		t.Errorf("a Pod of another UID under the same name was refreshed")
	}

	x.PodEvent(updated, true)
	if got := x.RefreshPod("ns", "p", "pod-1", func(p *corev1.Pod) *corev1.Pod { return newer("3", p) }); got != nil {
		t.Errorf("a deleted Pod was refreshed back into the index")
	}
	if families, owners := x.Sizes(); families != 0 || owners != 0 {
		t.Errorf("after the deletion and a refresh: %d families, %d owners, want none", families, owners)
	}
}

// A report stored while the handler records its Pod is never lost: the
// handler's overlay runs under the family's lock, so it either reads the
// report or is followed by the report's RefreshPod.
func TestChildIndexPodEventWithOrdersAReportAndItsRefresh(t *testing.T) {
	for name, gone := range map[string]bool{"an added Pod": false, "an updated Pod": true} {
		t.Run(name, func(t *testing.T) {
			x := state.NewChildIndex()
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "pod-1",
				Labels: map[string]string{jobset.JobSetUIDKey: "uid-1"}, Annotations: map[string]string{}}}
			if gone { // recorded once before: this event is its update
				x.PodEvent(pod, false)
			}
			var mu sync.Mutex
			stored := ""
			overlay := func(p *corev1.Pod) *corev1.Pod {
				mu.Lock()
				defer mu.Unlock()
				if stored == "" {
					return p
				}
				out := p.DeepCopy()
				out.Annotations[jobset.EpochKey] = stored
				return out
			}
			refreshed := make(chan struct{})
			x.PodEventWith(pod, false, func(p *corev1.Pod) *corev1.Pod {
				out := overlay(p)
				// The report arrives after the overlay read the store.
				go func() {
					defer close(refreshed)
					mu.Lock()
					stored = "2"
					mu.Unlock()
					x.RefreshPod("ns", "p", "pod-1", overlay)
				}()
				return out
			})
			<-refreshed
			got := x.RefreshPod("ns", "p", "pod-1", func(p *corev1.Pod) *corev1.Pod { return p })
			if got == nil || got.Annotations[jobset.EpochKey] != "2" {
				t.Errorf("recorded %v: want the report stored meanwhile (epoch 2)", got)
			}
		})
	}
}
