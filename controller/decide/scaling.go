package decide

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/state"
)

// This file decides the scaling of elastic replicated jobs. An update may
// change the parallelism and completions of an Indexed replicated job
// (policies/builtin/update.rego admits it while the JobSet runs, with
// completions equal to parallelism); the running Jobs then follow, since
// Kubernetes lets an Indexed Job change both together, and its Job
// controller starts the Pods of the new indexes or deletes those of the
// dropped ones. Jobs created later take the template as it is.

// JobScale is one Job to patch to a replicated job's size.
type JobScale struct {
	Job           *batchv1.Job
	replicatedJob string
	// from is the Job's parallelism, to the template's.
	from, To int32
}

// jobsToScale returns the active Jobs of the current attempt, suspended
// ones included, whose parallelism or completions differ from their
// replicated job's template, when the template is Indexed with both equal
// (what the update rule admits, and what the Job API lets change). Finished Jobs and those of earlier attempts are left
// alone: nothing runs there to scale, or they are deleted anyway.
func jobsToScale(js *jobset.JobSet, c state.Children) []JobScale {
	templates := make(map[string]*batchv1.JobSpec, len(js.Spec.ReplicatedJobs))
	for i := range js.Spec.ReplicatedJobs {
		templates[js.Spec.ReplicatedJobs[i].Name] = &js.Spec.ReplicatedJobs[i].Template.Spec
	}
	scalable := func(t *batchv1.JobSpec) bool {
		return ptr.Deref(t.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion &&
			t.Parallelism != nil && t.Completions != nil && *t.Parallelism == *t.Completions
	}
	// The counts say whether any Job is off its template's size; only then
	// are the Jobs walked.
	off := false
	for name, t := range templates {
		counts := c.Counts(name)
		if scalable(t) && counts.Unfinished > counts.Sizes[[2]int32{*t.Parallelism, *t.Completions}] {
			off = true
		}
	}
	if !off {
		return nil
	}
	var out []JobScale
	for _, job := range c.Active() {
		rj := job.Labels[jobset.ReplicatedJobNameKey]
		t, ok := templates[rj]
		if !ok || !scalable(t) {
			continue
		}
		if ptr.Equal(job.Spec.Parallelism, t.Parallelism) && ptr.Equal(job.Spec.Completions, t.Completions) {
			continue
		}
		out = append(out, JobScale{Job: job, replicatedJob: rj, from: ptr.Deref(job.Spec.Parallelism, 1), To: *t.Parallelism})
	}
	return out
}

// ScaledEvents says, per replicated job and size change, which Jobs were
// scaled: one Event per decision carried out.
func ScaledEvents(done []JobScale) []Event {
	type key struct {
		rj       string
		from, to int32
	}
	var order []key
	jobs := map[key][]string{}
	for _, s := range done {
		k := key{s.replicatedJob, s.from, s.To}
		if _, ok := jobs[k]; !ok {
			order = append(order, k)
		}
		jobs[k] = append(jobs[k], s.Job.Name)
	}
	out := make([]Event, 0, len(order))
	for _, k := range order {
		out = append(out, Event{corev1.EventTypeNormal, ReasonReplicatedJobScaled, fmt.Sprintf(
			"replicated job %s scaled from %d to %d Pods per Job (parallelism and completions of Jobs %s)",
			k.rj, k.from, k.to, strings.Join(jobs[k], ", "))})
	}
	return out
}
