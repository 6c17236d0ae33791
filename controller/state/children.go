package state

import (
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// Children is what decide reads of a JobSet's Jobs: the family's totals,
// seen through the expectations of this reconcile. A Job belongs to the
// current attempt when its restart-attempt label equals status.restarts
// and its job-restart-attempt label equals the individual restart count of
// its index; any other Job is from an earlier attempt and is deleted.
//
// The counts come from the family's running totals; the Jobs themselves
// are listed (a walk of every Job) only when a count says there is
// something to act on: Jobs to delete, to suspend or resume, to scale, a
// failure to judge, Jobs missing.
type Children struct {
	Family *Family
	// rjs counts the Jobs of the current attempt that are not being
	// deleted, by replicated job.
	rjs map[string]*JobCounts
	// Previous counts the Jobs of an earlier attempt not yet being
	// deleted; terminating those being deleted.
	Previous, Terminating int32
	// deleting holds the UIDs of Jobs deleted by an earlier reconcile
	// whose deletion the cache does not show yet: they count as being
	// deleted.
	deleting map[types.UID]bool
	// creating names the Jobs created by an earlier reconcile that the
	// cache does not show yet: their names are taken.
	creating map[string]bool
}

// ClassifyJobs sees the family's Jobs, counted under js, through the
// expectations: deleting holds the UIDs of Jobs deleted whose deletion the
// cache does not show yet (they count as being deleted), creating the
// names of Jobs created not shown yet (their names are taken). The family
// must be counted under js's view.
func ClassifyJobs(fam *Family, deleting map[types.UID]bool, creating map[string]bool) Children {
	c := Children{Family: fam, rjs: fam.rjs, Previous: fam.previous, Terminating: fam.terminating, deleting: deleting, creating: creating}
	var moved []*JobFacts
	for uid := range deleting {
		if j := fam.byUID[uid]; j != nil && (j.kind == Current || j.kind == Previous) {
			moved = append(moved, j)
		}
	}
	if len(moved) == 0 {
		return c
	}
	// A copy: the family's totals are the cache's, these this reconcile's.
	adjusted := &Family{view: fam.view, rjs: make(map[string]*JobCounts, len(fam.rjs)), previous: fam.previous, terminating: fam.terminating}
	for name, counts := range fam.rjs {
		adjusted.rjs[name] = counts.clone()
	}
	for _, j := range moved {
		adjusted.countJob(adjusted.rjs, j, j.kind, -1)
		adjusted.countJob(adjusted.rjs, j, Terminating, 1)
	}
	c.rjs, c.Previous, c.Terminating = adjusted.rjs, adjusted.previous, adjusted.terminating
	return c
}

// kindOf is where a Job stands for this reconcile.
func (c *Children) kindOf(j *JobFacts) JobKind {
	if c.deleting[j.job.UID] && (j.kind == Current || j.kind == Previous) {
		return Terminating
	}
	return j.kind
}

// List returns the Jobs keep accepts, by name: a walk of every Job, for
// when a count said some are there to act on.
func (c *Children) List(keep func(j *JobFacts, kind JobKind) bool) []*batchv1.Job {
	var out []*batchv1.Job
	for _, j := range c.Family.jobs {
		if keep(j, c.kindOf(j)) {
			out = append(out, j.job)
		}
	}
	sortByName(out)
	return out
}

// Counts returns the counts of a replicated job; zero if it has none.
func (c *Children) Counts(rj string) *JobCounts {
	if counts := c.rjs[rj]; counts != nil {
		return counts
	}
	return &JobCounts{}
}

// Total sums a count over the replicated jobs.
func (c *Children) Total(count func(*JobCounts) int32) int32 {
	var n int32
	for _, counts := range c.rjs {
		n += count(counts)
	}
	return n
}

// Active returns the unfinished Jobs of the current attempt.
func (c *Children) Active() []*batchv1.Job {
	if c.Total(func(r *JobCounts) int32 { return r.Unfinished }) == 0 {
		return nil
	}
	return c.List(func(j *JobFacts, kind JobKind) bool { return kind == Current && !j.Failed && !j.Complete })
}

// Failed returns the failed Jobs of the current attempt.
func (c *Children) Failed() []*batchv1.Job {
	if c.Total(func(r *JobCounts) int32 { return r.Failed }) == 0 {
		return nil
	}
	return c.List(func(j *JobFacts, kind JobKind) bool { return kind == Current && j.Failed })
}

// PreviousJobs returns the Jobs of an earlier attempt not yet being
// deleted.
func (c *Children) PreviousJobs() []*batchv1.Job {
	if c.Previous == 0 {
		return nil
	}
	return c.List(func(_ *JobFacts, kind JobKind) bool { return kind == Previous })
}

// Taken reports whether a Job of that name exists, of any attempt, or was
// created and is not seen yet: a Job of the current attempt can be
// created under that name only once the old Job is gone, whose deletion
// triggers the next reconcile.
func (c *Children) Taken(name string) bool {
	_, ok := c.Family.jobs[name]
	return ok || c.creating[name]
}

// isCurrentAttempt is the definition of a Job of the current attempt, read
// from the JobSet and the Job's labels (jobset.JobAttemptMismatch).
// JobView.kindOf decides the same from a Job's record without building a
// string; the tests hold them to each other.
func isCurrentAttempt(js *jobset.JobSet, job *batchv1.Job) bool {
	key, _ := jobset.JobAttemptMismatch(js, job.Labels)
	return key == ""
}

// JobFinished reports whether the Job carries the final condition t.
func JobFinished(job *batchv1.Job, t batchv1.JobConditionType) bool {
	return JobCondition(job, t) != nil
}

// JobCondition returns the Job's condition of type t if it is true.
func JobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// JobReady reports whether every Pod the Job expects at once is ready or
// has succeeded.
func JobReady(job *batchv1.Job) bool {
	expected := min(ptr.Deref(job.Spec.Parallelism, 1), ptr.Deref(job.Spec.Completions, ptr.Deref(job.Spec.Parallelism, 1)))
	return ptr.Deref(job.Status.Ready, 0)+job.Status.Succeeded >= expected
}

func sortByName(jobs []*batchv1.Job) {
	slices.SortFunc(jobs, func(a, b *batchv1.Job) int { return strings.Compare(a.Name, b.Name) })
}
