package controller

import (
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// children sorts the child Jobs of a JobSet by what the controller must do
// with them. A Job belongs to the current attempt when its restart-attempt
// label equals status.restarts and its job-restart-attempt label equals the
// individual restart count of its index; any other Job is from an earlier
// attempt and is deleted.
type children struct {
	// current holds the Jobs of the current attempt that are not being
	// deleted, by name.
	current map[string]*batchv1.Job
	// active, succeeded and failed partition current.
	active, succeeded, failed []*batchv1.Job
	// previous are Jobs of an earlier attempt not yet being deleted.
	previous []*batchv1.Job
	// terminating are Jobs being deleted.
	terminating []*batchv1.Job
	// taken holds the names of previous and terminating Jobs: a Job of the
	// current attempt can be created under such a name only once the old
	// Job is gone, whose deletion triggers the next reconcile.
	taken map[string]bool
}

// classifyJobs sorts jobs; deleting holds the UIDs of Jobs deleted by an
// earlier reconcile whose deletion the cache does not show yet: they count
// as being deleted.
func classifyJobs(js *jobset.JobSet, jobs []batchv1.Job, deleting map[types.UID]bool) children {
	c := children{current: map[string]*batchv1.Job{}, taken: map[string]bool{}}
	for i := range jobs {
		job := &jobs[i]
		switch {
		case job.DeletionTimestamp != nil || deleting[job.UID]:
			c.terminating = append(c.terminating, job)
			c.taken[job.Name] = true
		case !isCurrentAttempt(js, job):
			c.previous = append(c.previous, job)
			c.taken[job.Name] = true
		default:
			c.current[job.Name] = job
			switch {
			case jobFinished(job, batchv1.JobFailed):
				c.failed = append(c.failed, job)
			case jobFinished(job, batchv1.JobComplete):
				c.succeeded = append(c.succeeded, job)
			default:
				c.active = append(c.active, job)
			}
		}
	}
	return c
}

func isCurrentAttempt(js *jobset.JobSet, job *batchv1.Job) bool {
	if job.Labels[jobset.RestartsKey] != strconv.Itoa(int(recreateAttempt(&js.Status))) {
		return false
	}
	// An index that is not one of its replicated job's (a label edited by
	// hand, a replicated job renamed) makes a Job of no attempt: deleted.
	index, err := strconv.Atoi(job.Labels[jobset.JobIndexKey])
	if err != nil || index < 0 || index >= replicasOf(js, job.Labels[jobset.ReplicatedJobNameKey]) {
		return false
	}
	want := jobRestarts(js, job.Labels[jobset.ReplicatedJobNameKey], index)
	return job.Labels[JobRestartAttemptKey] == strconv.Itoa(int(want))
}

// jobFinished reports whether the Job carries the final condition t.
func jobFinished(job *batchv1.Job, t batchv1.JobConditionType) bool {
	return jobCondition(job, t) != nil
}

// jobCondition returns the Job's condition of type t if it is true.
func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// jobReady reports whether every Pod the Job expects at once is ready or
// has succeeded.
func jobReady(job *batchv1.Job) bool {
	expected := min(ptr.Deref(job.Spec.Parallelism, 1), ptr.Deref(job.Spec.Completions, ptr.Deref(job.Spec.Parallelism, 1)))
	return ptr.Deref(job.Status.Ready, 0)+job.Status.Succeeded >= expected
}

// previousAttemptPods counts Pods left over from an earlier restart attempt,
// which BlockingRecreate waits for.
func previousAttemptPods(js *jobset.JobSet, pods []corev1.Pod) int {
	n := 0
	attempt := strconv.Itoa(int(recreateAttempt(&js.Status)))
	for i := range pods {
		if pods[i].Labels[jobset.RestartsKey] != attempt {
			n++
		}
	}
	return n
}

func sortByName(jobs []*batchv1.Job) {
	slices.SortFunc(jobs, func(a, b *batchv1.Job) int { return strings.Compare(a.Name, b.Name) })
}
