package state

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// This file reads the attempt labels of a Job, and names its Jobs; which
// Jobs are current is the JobSet API's (jobset.JobAttemptMismatch), and
// JobView.kindOf decides the same from a Job's record.

// jobRestartAttempt is a Job's job-restart-attempt label as the Job's
// attempt is decided on: -1 when not written as a number is, and 0 when
// the label is absent (jobset.JobRestartAttemptOf).
func jobRestartAttempt(job *batchv1.Job) int32 {
	return canonicalInt(jobset.JobRestartAttemptOf(job.Labels))
}

// JobName is the name of the Job at index of a replicated Job.
func JobName(jobSetName, replicatedJob string, index int) string {
	return fmt.Sprintf("%s-%s-%d", jobSetName, replicatedJob, index)
}
