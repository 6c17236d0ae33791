package state

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// A family is what a reconcile needs to know of one JobSet's Jobs and Pods,
// kept as running totals. A reconcile that listed and walked every child
// cost about 10 µs per Pod and Job at 5,000 of each, on every event of a
// JobSet whose Pods all change several times per restart; the totals make
// an event cost O(1) (its object's old contribution is taken away, its new
// one added) and a reconcile with nothing to do O(replicated jobs).
//
// Each Job and Pod is held as a compact record of the facts decide reads
// (JobFacts, podFacts), extracted once per event, with the cache's object
// beside it for the rare decision that acts on it. Invariants:
//
//   - jobs and pods hold exactly the Jobs controlled by the JobSet's UID
//     and the Pods labelled with it, as the cache holds them;
//   - rjs, previous and terminating are the sums of the Jobs'
//     contributions under view, the JobSet's restart attempt and its
//     replicated jobs' replicas and individual restarts, which decide
//     which Jobs are of the current attempt; until a reconcile set a view
//     no Job is counted;
//   - attempts are the sums of the Pods' contributions, by their
//     restart-attempt label: they depend on nothing of the JobSet, so no
//     change of its status recounts them.
//
// A change of view (a restart, a Job restarted alone, a changed replica
// count) recounts the Jobs from their records: O(N) once per restart, with
// no allocation per Job. recount does the same from scratch and is what
// the tests compare the running totals against.
//
// A family is not safe for concurrent use: ChildIndex locks it.
type Family struct {
	jobs  map[string]*JobFacts
	byUID map[types.UID]*JobFacts
	pods  map[string]*podFacts

	view *JobView
	// rjs counts the Jobs of the current attempt by replicated job.
	rjs map[string]*JobCounts
	// previous and terminating count the Jobs of earlier attempts and
	// those being deleted.
	previous, terminating int32
	// attempts holds the Pods by the restart attempt they were created
	// for.
	attempts map[string]*podAttempt
}

func newFamily() *Family {
	return &Family{
		jobs:     map[string]*JobFacts{},
		byUID:    map[types.UID]*JobFacts{},
		pods:     map[string]*podFacts{},
		rjs:      map[string]*JobCounts{},
		attempts: map[string]*podAttempt{},
	}
}

// FamilyOf builds the family of js from whole lists of its children, as a
// full read of the cache would.
func FamilyOf(js *jobset.JobSet, jobs []batchv1.Job, pods []corev1.Pod) *Family {
	f := newFamily()
	for i := range jobs {
		f.setJob(&jobs[i])
	}
	for i := range pods {
		f.setPod(&pods[i])
	}
	f.setView(ViewOf(js))
	return f
}

func (f *Family) empty() bool { return len(f.jobs) == 0 && len(f.pods) == 0 }

// JobKind is where a Job stands under a view.
type JobKind uint8

const (
	// uncounted: no view yet.
	uncounted JobKind = iota
	// Current: of the current attempt, not being deleted.
	Current
	// Previous: of an earlier attempt, not yet being deleted.
	Previous
	// Terminating: being deleted.
	Terminating
)

// JobFacts is what decide reads of a Job.
type JobFacts struct {
	job           *batchv1.Job
	ReplicatedJob string
	// index is the job-index label; -1 when it is not a number.
	index int
	// attempt and jobAttempt are the restart-attempt and
	// job-restart-attempt labels; -1 when not written as a number is.
	attempt, jobAttempt int32
	deleting            bool
	Failed, Complete    bool
	// failing: the Job controller is failing it (FailureTarget).
	failing bool
	// Suspended, running (some Pod active) and ready as
	// replicatedJobsStatus counts them.
	Suspended, running, ready bool
	// size is the Job's parallelism and completions, -1 for unset.
	size [2]int32
	kind JobKind
}

func jobFactsOf(job *batchv1.Job) *JobFacts {
	index, err := strconv.Atoi(job.Labels[jobset.JobIndexKey])
	if err != nil || index < 0 {
		index = -1
	}
	return &JobFacts{
		job:           job,
		ReplicatedJob: job.Labels[jobset.ReplicatedJobNameKey],
		index:         index,
		attempt:       canonicalInt(job.Labels[jobset.RestartsKey]),
		jobAttempt:    jobRestartAttempt(job),
		deleting:      job.DeletionTimestamp != nil,
		Failed:        JobFinished(job, batchv1.JobFailed),
		Complete:      JobFinished(job, batchv1.JobComplete),
		failing:       JobFinished(job, batchv1.JobFailureTarget),
		Suspended:     ptr.Deref(job.Spec.Suspend, false),
		running:       job.Status.Active > 0,
		ready:         JobReady(job),
		size:          [2]int32{ptr.Deref(job.Spec.Parallelism, -1), ptr.Deref(job.Spec.Completions, -1)},
	}
}

// canonicalInt is the non-negative int32 s is written as by strconv.Itoa,
// or -1: labels are compared as the strings the controller writes (no
// sign, no leading zero). One pass over s, without allocating: it runs for
// every Job event and every Job of a recount.
func canonicalInt(s string) int32 {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return -1
	}
	var v int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return -1
		}
		v = v*10 + int64(s[i]-'0')
	}
	if v > math.MaxInt32 {
		return -1
	}
	return int32(v)
}

// JobView is what of a JobSet decides which of its Jobs are of the current
// attempt (isCurrentAttempt).
type JobView struct {
	name    string
	attempt int32
	// replicas and jobRestarts by replicated job; the first of a name
	// wins, as jobset.ReplicasOf and jobset.JobRestarts read them.
	replicas    map[string]int
	jobRestarts map[string][]int32
}

// ViewOf is the view of js: what of it decides which of its Jobs are of
// the current attempt.
func ViewOf(js *jobset.JobSet) *JobView {
	v := &JobView{
		name:        js.Name,
		attempt:     jobset.RecreateAttempt(&js.Status),
		replicas:    make(map[string]int, len(js.Spec.ReplicatedJobs)),
		jobRestarts: make(map[string][]int32, len(js.Status.ReplicatedJobsStatus)),
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		if _, ok := v.replicas[rj.Name]; !ok {
			v.replicas[rj.Name] = int(rj.Replicas)
		}
	}
	for _, s := range js.Status.ReplicatedJobsStatus {
		if _, ok := v.jobRestarts[s.Name]; !ok {
			v.jobRestarts[s.Name] = s.JobRestarts
		}
	}
	return v
}

func (v *JobView) equal(o *JobView) bool {
	if v == nil || o == nil {
		return v == o
	}
	if v.name != o.name || v.attempt != o.attempt || len(v.replicas) != len(o.replicas) || len(v.jobRestarts) != len(o.jobRestarts) {
		return false
	}
	for k, r := range v.replicas {
		if or, ok := o.replicas[k]; !ok || or != r {
			return false
		}
	}
	for k, r := range v.jobRestarts {
		if or, ok := o.jobRestarts[k]; !ok || !slices.Equal(or, r) {
			return false
		}
	}
	return true
}

func (v *JobView) kindOf(j *JobFacts) JobKind {
	if v == nil {
		return uncounted
	}
	if j.deleting {
		return Terminating
	}
	if j.attempt != v.attempt || j.attempt < 0 {
		return Previous
	}
	replicas, ok := v.replicas[j.ReplicatedJob]
	if !ok || j.index < 0 || j.index >= replicas {
		return Previous
	}
	var want int32
	if rs := v.jobRestarts[j.ReplicatedJob]; j.index < len(rs) {
		want = rs[j.index]
	}
	if j.jobAttempt != want {
		return Previous
	}
	return Current
}

// named reports whether the Job is named as JobName names the Job at its
// index, without building the name.
func (v *JobView) named(j *JobFacts) bool {
	name, ok := strings.CutPrefix(j.job.Name, v.name)
	if !ok {
		return false
	}
	if name, ok = strings.CutPrefix(name, "-"); !ok {
		return false
	}
	if name, ok = strings.CutPrefix(name, j.ReplicatedJob); !ok {
		return false
	}
	if name, ok = strings.CutPrefix(name, "-"); !ok {
		return false
	}
	return j.index >= 0 && int(canonicalInt(name)) == j.index
}

// JobCounts are the Jobs of the current attempt of one replicated job.
type JobCounts struct {
	Failed, Succeeded int32
	// Unfinished Jobs, and of them the suspended, running, ready and
	// failing ones.
	Unfinished, Suspended, Running, Ready, Failing int32
	// Named counts the Jobs named after their index: when it equals the
	// replicas, no Job of the replicated job is missing.
	Named int32
	// Sizes counts the unfinished Jobs by parallelism and completions.
	Sizes map[[2]int32]int32
}

func (c *JobCounts) clone() *JobCounts {
	out := *c
	out.Sizes = make(map[[2]int32]int32, len(c.Sizes))
	for k, v := range c.Sizes {
		out.Sizes[k] = v
	}
	return &out
}

// setView counts the Jobs under v, recounting them if the view changed.
func (f *Family) setView(v *JobView) {
	if f.view.equal(v) {
		return
	}
	f.view = v
	f.recount()
}

// recount computes the Jobs' totals from scratch under the family's view.
func (f *Family) recount() {
	clear(f.rjs)
	f.previous, f.terminating = 0, 0
	if f.view != nil {
		for name := range f.view.replicas {
			f.rjs[name] = &JobCounts{Sizes: map[[2]int32]int32{}}
		}
	}
	for _, j := range f.jobs {
		j.kind = f.view.kindOf(j)
		f.countJob(f.rjs, j, j.kind, 1)
	}
}

// countJob adds (sign 1) or takes away (sign -1) a Job's contribution of
// kind to rjs and the family's totals.
func (f *Family) countJob(rjs map[string]*JobCounts, j *JobFacts, kind JobKind, sign int32) {
	switch kind {
	case Previous:
		f.previous += sign
		return
	case Terminating:
		f.terminating += sign
		return
	case Current:
	default:
		return
	}
	c := rjs[j.ReplicatedJob]
	if c == nil {
		return // unreachable: a current Job's replicated job is in the view
	}
	if f.view.named(j) {
		c.Named += sign
	}
	switch {
	case j.Failed:
		c.Failed += sign
		return
	case j.Complete:
		c.Succeeded += sign
		return
	}
	c.Unfinished += sign
	if j.Suspended {
		c.Suspended += sign
	} else if j.running {
		c.Running += sign
	}
	if j.ready {
		c.Ready += sign
	}
	if j.failing {
		c.Failing += sign
	}
	if n := c.Sizes[j.size] + sign; n != 0 {
		c.Sizes[j.size] = n
	} else {
		delete(c.Sizes, j.size)
	}
}

// setJob records a Job's creation or update.
func (f *Family) setJob(job *batchv1.Job) {
	f.deleteJob(job.Name)
	j := jobFactsOf(job)
	j.kind = f.view.kindOf(j)
	f.jobs[job.Name] = j
	f.byUID[job.UID] = j
	f.countJob(f.rjs, j, j.kind, 1)
}

// deleteJob forgets a Job.
func (f *Family) deleteJob(name string) {
	j, ok := f.jobs[name]
	if !ok {
		return
	}
	f.countJob(f.rjs, j, j.kind, -1)
	delete(f.jobs, name)
	if f.byUID[j.job.UID] == j {
		delete(f.byUID, j.job.UID)
	}
}

// Job returns the Job of that name, nil if there is none.
func (f *Family) Job(name string) *batchv1.Job {
	if j := f.jobs[name]; j != nil {
		return j.job
	}
	return nil
}

// podFacts is what decide reads of a Pod.
type podFacts struct {
	pod     *corev1.Pod
	attempt string
	class   podClass
}

// podClass is a Pod's facts without its name: Pods of one class count
// alike, and a JobSet's Pods fall in a handful of classes (every Pod of a
// synced group in one), which is what decide walks.
type podClass struct {
	PodEpoch
	// suspect: the Pod failed, is being deleted or a worker exited, which
	// a podFailurePolicy may turn into its Job's failure or ignore
	// (judgePod).
	suspect bool
}

func podClassOf(pod *corev1.Pod) podClass {
	p := ObservePod(pod)
	p.Name = ""
	return podClass{PodEpoch: p, suspect: p.Gone || p.WorkerExited != ""}
}

// podAttempt holds the Pods of one restart attempt by class.
type podAttempt struct {
	n       int
	classes map[podClass]map[string]struct{}
}

// setPod records a Pod's creation or update.
func (f *Family) setPod(pod *corev1.Pod) {
	f.deletePod(pod.Name)
	p := &podFacts{pod: pod, attempt: pod.Labels[jobset.RestartsKey], class: podClassOf(pod)}
	f.pods[pod.Name] = p
	a := f.attempts[p.attempt]
	if a == nil {
		a = &podAttempt{classes: map[podClass]map[string]struct{}{}}
		f.attempts[p.attempt] = a
	}
	a.n++
	names := a.classes[p.class]
	if names == nil {
		names = map[string]struct{}{}
		a.classes[p.class] = names
	}
	names[pod.Name] = struct{}{}
}

// deletePod forgets a Pod.
func (f *Family) deletePod(name string) {
	p, ok := f.pods[name]
	if !ok {
		return
	}
	delete(f.pods, name)
	a := f.attempts[p.attempt]
	a.n--
	names := a.classes[p.class]
	delete(names, name)
	if len(names) == 0 {
		delete(a.classes, p.class)
	}
	if a.n == 0 {
		delete(f.attempts, p.attempt)
	}
}

// PodsNotOf counts the Pods of any restart attempt but attempt.
func (f *Family) PodsNotOf(attempt string) int {
	n := len(f.pods)
	if a := f.attempts[attempt]; a != nil {
		n -= a.n
	}
	return n
}

// PodGroup is Pods of one class: their shared facts and their names.
// fatal is set when any of them is fatal, ignored when every one is
// ignored.
type PodGroup struct {
	PodEpoch
	Names map[string]struct{}
	// Stuck are the group's Pods whose worker exited with a code that
	// fails their Job while other containers of theirs still run: such a
	// Pod does not fail by itself (see stuckFatal).
	Stuck []*corev1.Pod
	// Pods are the group's Pods, given only for a group whose agents
	// crash-loop (AgentCrashLooping), which a restart may have to delete.
	Pods []*corev1.Pod
	// ImagePullMessage is the kubelet's message on the group's first Pod
	// (First) for the container that waits for its image (ImagePull).
	ImagePullMessage string
}

// N is the number of Pods in the group.
func (g PodGroup) N() int { return len(g.Names) }

// First is the smallest name of the group, for messages: a group names the
// same Pod whatever order its Pods came in.
func (g PodGroup) First() string {
	first := ""
	for name := range g.Names {
		if first == "" || name < first {
			first = name
		}
	}
	return first
}

// SortedNames lists the group's names in order.
func (g PodGroup) SortedNames() []string {
	out := make([]string, 0, len(g.Names))
	for name := range g.Names {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// PodGroups returns the Pods of attempt as seen by js: their epochs
// bounded by its syncedEpoch and judged by its podFailurePolicies
// (judgePod), in a fixed order. Only the Pods of a suspect class are
// judged one by one.
func (f *Family) PodGroups(js *jobset.JobSet, attempt string) []PodGroup {
	a := f.attempts[attempt]
	if a == nil {
		return nil
	}
	out := make([]PodGroup, 0, len(a.classes))
	for class, names := range a.classes {
		g := PodGroup{PodEpoch: boundEpoch(js, class.PodEpoch), Names: names}
		if pfp := podFailurePolicy(js, class.ReplicatedJob); class.suspect && pfp != nil {
			g.Ignored = true
			for name := range names {
				pod := f.pods[name].pod
				fatal, ignored, byStatus := judgePod(pfp, pod, class.Gone)
				g.Ignored = g.Ignored && ignored
				if fatal {
					g.Fatal = true
					// Deleted only on the kubelet's word: a Pod whose
					// agent alone said so fails by itself once the
					// kubelet sees its container's exit.
					if byStatus && stuckFatal(pod) {
						g.Stuck = append(g.Stuck, pod)
					}
				}
			}
			slices.SortFunc(g.Stuck, byName)
		}
		if class.ImagePull.Reason != "" {
			g.ImagePullMessage = imagePullMessage(f.pods[g.First()].pod, class.ImagePull.Container)
		}
		if class.AgentCrashLooping {
			for name := range names {
				g.Pods = append(g.Pods, f.pods[name].pod)
			}
			slices.SortFunc(g.Pods, byName)
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b PodGroup) int { return comparePodEpochs(a.PodEpoch, b.PodEpoch) })
	return out
}

// byName orders Pods by name, so that what is done to a group's Pods does
// not depend on map order.
func byName(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) }

// comparePodEpochs orders podEpochs by every field.
func comparePodEpochs(a, b PodEpoch) int {
	bools := func(x, y bool) int {
		switch {
		case x == y:
			return 0
		case x:
			return 1
		}
		return -1
	}
	return cmp.Or(
		cmp.Compare(a.ReplicatedJob, b.ReplicatedJob),
		cmp.Compare(a.Epoch, b.Epoch),
		bools(a.Gone, b.Gone),
		bools(a.Fatal, b.Fatal),
		bools(a.Ignored, b.Ignored),
		cmp.Compare(a.WorkerExited, b.WorkerExited),
		bools(a.Finished, b.Finished),
		bools(a.Ready, b.Ready),
		cmp.Compare(a.ReadyEpoch, b.ReadyEpoch),
		cmp.Compare(a.RawEpoch, b.RawEpoch),
		cmp.Compare(a.InvalidEpoch, b.InvalidEpoch),
		cmp.Compare(a.InvalidWhy, b.InvalidWhy),
		cmp.Compare(a.EpochKey, b.EpochKey),
		bools(a.Reported, b.Reported),
		cmp.Compare(a.AgentRestarts, b.AgentRestarts),
		bools(a.AgentCrashLooping, b.AgentCrashLooping),
		bools(a.ImagePull.Agent, b.ImagePull.Agent),
		cmp.Compare(a.ImagePull.Container, b.ImagePull.Container),
		cmp.Compare(a.ImagePull.Image, b.ImagePull.Image),
		cmp.Compare(a.ImagePull.Reason, b.ImagePull.Reason),
		cmp.Compare(a.ImagePull.ServiceAccount, b.ImagePull.ServiceAccount),
		cmp.Compare(a.Name, b.Name),
	)
}
