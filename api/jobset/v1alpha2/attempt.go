package v1alpha2

import (
	"fmt"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
)

// This file says which restart attempt a Job of a JobSet belongs to, from
// the JobSet and the Job's labels alone. The controller keeps the Jobs of
// the current attempt and deletes the others; inplacectl migrate names,
// by the same rules, the Jobs upstream JobSet left that the controller
// would not adopt.

// RecreateAttempt is the attempt the current Jobs belong to: the restarts
// that recreated the Jobs, in-place restarts excluded. It is the value of
// the RestartsKey label of the Jobs of the current attempt.
func RecreateAttempt(status *JobSetStatus) int32 {
	return status.Restarts - status.InPlaceRestarts
}

// Recreations counts the restarts that recreated Jobs: of the whole
// JobSet, and of single Jobs (RestartJob).
func Recreations(status *JobSetStatus) int32 {
	n := status.Restarts
	for _, r := range status.ReplicatedJobsStatus {
		for _, j := range r.JobRestarts {
			n += j
		}
	}
	return n
}

// Finished reports whether the JobSet reached a terminal state.
func Finished(status *JobSetStatus) bool {
	return status.TerminalState != "" ||
		meta.IsStatusConditionTrue(status.Conditions, string(JobSetCompleted)) ||
		meta.IsStatusConditionTrue(status.Conditions, string(JobSetFailed))
}

// JobRestarts is how many times the Job at index of the named replicated
// job was recreated alone: the value of the JobRestartAttemptKey label of
// the Job of the current attempt at that index.
func JobRestarts(js *JobSet, replicatedJob string, index int) int32 {
	for _, s := range js.Status.ReplicatedJobsStatus {
		if s.Name == replicatedJob && index < len(s.JobRestarts) {
			return s.JobRestarts[index]
		}
	}
	return 0
}

// ReplicasOf is the replicas of the named replicated job; 0 if the JobSet
// has none of that name.
func ReplicasOf(js *JobSet, replicatedJob string) int {
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == replicatedJob {
			return int(rj.Replicas)
		}
	}
	return 0
}

// JobRestartAttemptOf is a Job's JobRestartAttemptKey label, or "0" when
// it has none: a Job made by a controller that recreates no Job alone
// (upstream JobSet before its RestartJob action) was never recreated
// alone, so that a JobSet moved over from it keeps its Jobs
// (docs/how-to/migrate-from-jobset.md).
func JobRestartAttemptOf(labels map[string]string) string {
	if v, ok := labels[JobRestartAttemptKey]; ok {
		return v
	}
	return "0"
}

// JobAttemptMismatch says which label makes a Job, whose labels are
// given, no Job of js's current attempt, and why; key is "" for a Job of
// the current attempt. A Job whose RestartsKey is another attempt's
// belongs to an earlier attempt; one of the current attempt whose
// replicated job, index or JobRestartAttemptKey does not match (a label
// edited by hand, a replicated job renamed or scaled down, a Job
// recreated alone since) belongs to none. Either is deleted. The attempt
// labels are compared as strconv.Itoa writes them.
func JobAttemptMismatch(js *JobSet, labels map[string]string) (key, why string) {
	if attempt := strconv.Itoa(int(RecreateAttempt(&js.Status))); labels[RestartsKey] != attempt {
		return RestartsKey, fmt.Sprintf("label %s=%q, the current attempt is %s", RestartsKey, labels[RestartsKey], attempt)
	}
	rj := labels[ReplicatedJobNameKey]
	if !slices.ContainsFunc(js.Spec.ReplicatedJobs, func(r ReplicatedJob) bool { return r.Name == rj }) {
		return ReplicatedJobNameKey, fmt.Sprintf("label %s=%q names no replicated job", ReplicatedJobNameKey, rj)
	}
	index, err := strconv.Atoi(labels[JobIndexKey])
	if err != nil || index < 0 || index >= ReplicasOf(js, rj) {
		return JobIndexKey, fmt.Sprintf("label %s=%q is not an index of replicated job %s", JobIndexKey, labels[JobIndexKey], rj)
	}
	if got, want := JobRestartAttemptOf(labels), JobRestarts(js, rj, index); got != strconv.Itoa(int(want)) {
		return JobRestartAttemptKey, fmt.Sprintf("label %s=%q, status.replicatedJobsStatus says %d", JobRestartAttemptKey, got, want)
	}
	return "", ""
}
