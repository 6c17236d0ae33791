package state

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// This file says which attempt a JobSet's Jobs belong to: the labels that
// carry it, the names of the Jobs, and what of the JobSet's status decides
// which Jobs are current (isCurrentAttempt, JobView).

// JobRestartAttemptKey is a Job and Pod label and annotation holding how many
// times this Job was recreated alone (status.replicatedJobsStatus[].jobRestarts
// of its index) when it was created. A Job whose value is older is deleted.
const JobRestartAttemptKey = "jobset.sigs.k8s.io/job-restart-attempt"

// jobRestartAttempt is a Job's job-restart-attempt label as the Job's
// attempt is decided on: -1 when not written as a number is, and 0 when
// the label is absent. A Job without it was made by a controller that
// recreates no Job alone (upstream JobSet before its RestartJob action),
// so it was never recreated alone: a JobSet moved over from it keeps its
// Jobs instead of having every one recreated (docs/how-to/migrate-from-jobset.md).
func jobRestartAttempt(job *batchv1.Job) int32 {
	v, ok := job.Labels[JobRestartAttemptKey]
	if !ok {
		return 0
	}
	return canonicalInt(v)
}

// JobName is the name of the Job at index of a replicated Job.
func JobName(jobSetName, replicatedJob string, index int) string {
	return fmt.Sprintf("%s-%s-%d", jobSetName, replicatedJob, index)
}

// RecreateAttempt is the attempt the current Jobs belong to: restarts that
// recreated the Jobs, in-place restarts excluded. It is the value of the
// restart-attempt label.
func RecreateAttempt(status *jobset.JobSetStatus) int32 {
	return status.Restarts - status.InPlaceRestarts
}

// JobRestarts is how many times the Job at index was recreated alone.
func JobRestarts(js *jobset.JobSet, replicatedJob string, index int) int32 {
	for _, s := range js.Status.ReplicatedJobsStatus {
		if s.Name == replicatedJob && index < len(s.JobRestarts) {
			return s.JobRestarts[index]
		}
	}
	return 0
}

// ReplicasOf is the replicas of the named replicated job; 0 if the JobSet
// has none of that name.
func ReplicasOf(js *jobset.JobSet, rjName string) int {
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == rjName {
			return int(rj.Replicas)
		}
	}
	return 0
}
