package decide

import (
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// Condition reasons, Event reasons and messages. Reasons are the ones of
// upstream JobSet where it has one, so that tools reading them keep working.
const (
	// Completed condition.
	ReasonAllJobsCompleted  = "AllJobsCompleted"
	MessageAllJobsCompleted = "jobset completed successfully"

	// Failed condition.
	ReasonFailedJobs              = "FailedJobs"
	MessageFailedJobs             = "jobset failed due to one or more job failures"
	ReasonReachedMaxRestarts      = "ReachedMaxRestarts"
	MessageReachedMaxRestarts     = "jobset failed due to reaching max number of restarts"
	ReasonFailJobSetAction        = "FailJobSetFailurePolicyAction"
	MessageFailJobSetAction       = "applying FailJobSet failure policy action"
	ReasonRestartJobSetAction     = "RestartJobSetFailurePolicyAction"
	MessageRestartJobSetAction    = "applying RestartJobSet failure policy action"
	ReasonRestartJobSetIgnoreMax  = "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"
	MessageRestartJobSetIgnoreMax = "applying RestartJobSetAndIgnoreMaxRestarts failure policy action"
	ReasonRestartJobAction        = "RestartJobFailurePolicyAction"
	MessageRestartJobAction       = "applying RestartJob failure policy action"
	ReasonRestartJobIgnoreMax     = "RestartJobAndIgnoreMaxRestartsFailurePolicyAction"
	MessageRestartJobIgnoreMax    = "applying RestartJobAndIgnoreMaxRestarts failure policy action"
	// StartupPolicyInProgress and ImagePullFailure conditions closed by
	// the JobSet's finish.
	ReasonJobSetFinished  = "JobSetFinished"
	MessageJobSetFinished = "the jobset finished"

	// Suspended condition.
	ReasonSuspended  = "SuspendedJobs"
	MessageSuspended = "jobset is suspended"
	ReasonResumed    = "ResumeJobs"
	MessageResumed   = "jobset is resumed"

	// StartupPolicyInProgress and StartupPolicyCompleted conditions.
	ReasonInOrderInProgress  = "InOrderStartupPolicyInProgress"
	ReasonInOrderCompleted   = "InOrderStartupPolicyCompleted"
	MessageInOrderCompleted  = "startup policy successful: every replicated job is ready"
	messageInOrderInProgress = "replicated job %s is starting"

	// RestartingJobSet condition.
	ReasonRestartDefaultPolicy = "DefaultFailurePolicy"
	reasonRestartRuleFormat    = "FailurePolicy_%s"
	ReasonRestartJobsReady     = "JobsReady"
	MessageRestartJobsReady    = "all jobs are ready"
	// The JobSet finished: upstream's reasons, set on a RestartingJobSet
	// condition the JobSet has, whatever it said. (Upstream's
	// JobSetSuspended is not ours: a recreation goes on through a
	// suspension, see compatibility.md.)
	ReasonRestartJobSetCompleted = "JobSetCompleted"
	ReasonRestartJobSetFailed    = "JobSetFailed"
	MessageRestartJobSetFailed   = "jobset failed"

	// RestartingJobSet condition of InPlaceRestart JobSets. The two of
	// an in-place restart under way are the API's: the restart state
	// (jobset.RestartStateOf) reads them.
	ReasonInPlaceRestart         = jobset.ReasonInPlaceRestart
	ReasonInPlaceRestartDone     = "InPlaceRestartCompleted"
	ReasonInPlaceRestartTimedOut = "InPlaceRestartTimedOut"
	ReasonInPlaceScale           = jobset.ReasonInPlaceScale
	// ReasonInPlaceRestartSuspended: the JobSet was suspended (preempted)
	// during an in-place restart, which ends without a recreation.
	ReasonInPlaceRestartSuspended = "InPlaceRestartSuspended"
	// ReasonInPlaceRestartImpossible: a restart began while a member of
	// the group had finished, which cannot restart in place; the Jobs are
	// recreated.
	ReasonInPlaceRestartImpossible = "InPlaceRestartImpossible"

	// ImagePullFailure condition (image_pull.go).
	ReasonAgentImagePullFailed  = "AgentImagePullFailed"
	ReasonWorkerImagePullFailed = "WorkerImagePullFailed"
	ReasonImagePullResolved     = "ImagePullResolved"
	MessageImagePullResolved    = "no Pod of the JobSet waits for an image it cannot pull any more"

	// Events without a condition.
	// ReasonUpstreamInPlaceAdopted: the status upstream JobSet's in-place
	// restarts left was carried over (upstream.go).
	ReasonUpstreamInPlaceAdopted    = "UpstreamInPlaceRestartsCarriedOver"
	ReasonInvalidEpoch              = "InvalidEpoch"
	ReasonFatalExitPodDeleted       = "FatalExitPodDeleted"
	ReasonAgentCrashLoopPodDeleted  = "AgentCrashLoopPodDeleted"
	ReasonInvalidInPlaceRestartJobs = "InvalidInPlaceRestartJobs"
	ReasonJobCreationFailed         = "JobCreationFailed"
	ReasonJobResumeFailed           = "JobResumeFailed"
	ReasonReplicatedJobScaled       = "ReplicatedJobScaled"
	ReasonServiceCreationFailed     = "HeadlessServiceCreationFailed"
	ReasonPVCCreationFailed         = "PVCCreationFailed"
	ReasonTTLExpired                = "TTLAfterFinishedExpired"
	ReasonBroadcastConflict         = "BroadcastConfigMapConflict"
	ReasonAgentGrantsMissing        = "AgentGrantsMissing"
)
