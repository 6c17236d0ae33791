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

// children is what decide reads of a JobSet's Jobs: the family's totals,
// seen through the expectations of this reconcile. A Job belongs to the
// current attempt when its restart-attempt label equals status.restarts
// and its job-restart-attempt label equals the individual restart count of
// its index; any other Job is from an earlier attempt and is deleted.
//
// The counts come from the family's running totals; the Jobs themselves
// are listed (a walk of every Job) only when a count says there is
// something to act on: Jobs to delete, to suspend or resume, to scale, a
// failure to judge, Jobs missing.
type children struct {
	fam *family
	// rjs counts the Jobs of the current attempt that are not being
	// deleted, by replicated job.
	rjs map[string]*rjCounts
	// previous counts the Jobs of an earlier attempt not yet being
	// deleted; terminating those being deleted.
	previous, terminating int32
	// deleting holds the UIDs of Jobs deleted by an earlier reconcile
	// whose deletion the cache does not show yet: they count as being
	// deleted.
	deleting map[types.UID]bool
	// creating names the Jobs created by an earlier reconcile that the
	// cache does not show yet: their names are taken.
	creating map[string]bool
}

// classifyJobs sees the family's Jobs, counted under js, through the
// expectations: deleting holds the UIDs of Jobs deleted whose deletion the
// cache does not show yet (they count as being deleted), creating the
// names of Jobs created not shown yet (their names are taken). The family
// must be counted under js's view.
func classifyJobs(fam *family, deleting map[types.UID]bool, creating map[string]bool) children {
	c := children{fam: fam, rjs: fam.rjs, previous: fam.previous, terminating: fam.terminating, deleting: deleting, creating: creating}
	var moved []*jobFacts
	for uid := range deleting {
		if j := fam.byUID[uid]; j != nil && (j.kind == current || j.kind == previous) {
			moved = append(moved, j)
		}
	}
	if len(moved) == 0 {
		return c
	}
	// A copy: the family's totals are the cache's, these this reconcile's.
	adjusted := &family{view: fam.view, rjs: make(map[string]*rjCounts, len(fam.rjs)), previous: fam.previous, terminating: fam.terminating}
	for name, counts := range fam.rjs {
		adjusted.rjs[name] = counts.clone()
	}
	for _, j := range moved {
		adjusted.countJob(adjusted.rjs, j, j.kind, -1)
		adjusted.countJob(adjusted.rjs, j, terminating, 1)
	}
	c.rjs, c.previous, c.terminating = adjusted.rjs, adjusted.previous, adjusted.terminating
	return c
}

// kindOf is where a Job stands for this reconcile.
func (c *children) kindOf(j *jobFacts) jobKind {
	if c.deleting[j.job.UID] && (j.kind == current || j.kind == previous) {
		return terminating
	}
	return j.kind
}

// list returns the Jobs keep accepts, by name: a walk of every Job, for
// when a count said some are there to act on.
func (c *children) list(keep func(j *jobFacts, kind jobKind) bool) []*batchv1.Job {
	var out []*batchv1.Job
	for _, j := range c.fam.jobs {
		if keep(j, c.kindOf(j)) {
			out = append(out, j.job)
		}
	}
	sortByName(out)
	return out
}

// counts returns the counts of a replicated job; zero if it has none.
func (c *children) counts(rj string) *rjCounts {
	if counts := c.rjs[rj]; counts != nil {
		return counts
	}
	return &rjCounts{}
}

// total sums a count over the replicated jobs.
func (c *children) total(count func(*rjCounts) int32) int32 {
	var n int32
	for _, counts := range c.rjs {
		n += count(counts)
	}
	return n
}

func (c *children) active() []*batchv1.Job {
	if c.total(func(r *rjCounts) int32 { return r.unfinished }) == 0 {
		return nil
	}
	return c.list(func(j *jobFacts, kind jobKind) bool { return kind == current && !j.failed && !j.complete })
}

func (c *children) failed() []*batchv1.Job {
	if c.total(func(r *rjCounts) int32 { return r.failed }) == 0 {
		return nil
	}
	return c.list(func(j *jobFacts, kind jobKind) bool { return kind == current && j.failed })
}

func (c *children) previousJobs() []*batchv1.Job {
	if c.previous == 0 {
		return nil
	}
	return c.list(func(_ *jobFacts, kind jobKind) bool { return kind == previous })
}

// taken reports whether a Job of that name exists, of any attempt, or was
// created and is not seen yet: a Job of the current attempt can be
// created under that name only once the old Job is gone, whose deletion
// triggers the next reconcile.
func (c *children) taken(name string) bool {
	_, ok := c.fam.jobs[name]
	return ok || c.creating[name]
}

// isCurrentAttempt is the definition of a Job of the current attempt, read
// from the JobSet and the Job's labels. jobView.kindOf decides the same from
// a Job's record without building a string; the tests hold them to each
// other.
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

func sortByName(jobs []*batchv1.Job) {
	slices.SortFunc(jobs, func(a, b *batchv1.Job) int { return strings.Compare(a.Name, b.Name) })
}
