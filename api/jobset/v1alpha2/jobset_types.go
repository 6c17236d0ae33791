package v1alpha2

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JobSet runs a group of replicated Jobs as one workload: they start, fail,
// restart and complete together.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=js
// +kubebuilder:metadata:labels="inplace.dev/crd-owner=inplace"
// +kubebuilder:printcolumn:name="TerminalState",type=string,JSONPath=".status.terminalState",description="Completed or Failed once the JobSet has finished"
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=".status.restarts",description="Restarts so far, in place and by recreation"
// +kubebuilder:printcolumn:name="Epoch",type=integer,JSONPath=".status.syncedEpoch",description="Synced epoch of the in-place restart protocol"
// +kubebuilder:printcolumn:name="Completed",type=string,JSONPath=".status.conditions[?(@.type==\"Completed\")].status"
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=".spec.suspend",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type JobSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   JobSetSpec   `json:"spec,omitempty"`
	Status JobSetStatus `json:"status,omitempty"`
}

// JobSetList is a list of JobSets.
//
// +kubebuilder:object:root=true
type JobSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []JobSet `json:"items"`
}

// JobSetSpec is the desired state of a JobSet.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && has(self.replicatedJobs) && self.replicatedJobs.exists(r, has(r.dependsOn)))",message="spec.startupPolicy InOrder and spec.replicatedJobs[].dependsOn are mutually exclusive: use one of them"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.managedBy) == has(self.managedBy)",message="spec.managedBy is immutable: it cannot be added or removed after creation"
// +kubebuilder:validation:XValidation:rule="has(self.replicatedJobs) && size(self.replicatedJobs) > 0",message="spec.replicatedJobs must list at least one replicated job: a JobSet without one has nothing to run; add a replicated job with a Job template"
type JobSetSpec struct {
	// replicatedJobs are the groups of identical Jobs that form the set.
	// A Job is named <jobset>-<replicatedJob>-<index>. At least one is
	// required (upstream admits none; see docs/reference/compatibility.md).
	//
	// +listType=map
	// +listMapKey=name
	ReplicatedJobs []ReplicatedJob `json:"replicatedJobs,omitempty"`

	// network configures the headless Service and Pod DNS names.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.network is immutable"
	Network *Network `json:"network,omitempty"`

	// successPolicy says which Jobs must complete for the JobSet to complete.
	// Defaults to all Jobs.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.successPolicy is immutable"
	SuccessPolicy *SuccessPolicy `json:"successPolicy,omitempty"`

	// failurePolicy says what happens when a Job fails. Without it, the first
	// Job failure fails the JobSet.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.failurePolicy is immutable"
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`

	// startupPolicy says in what order the replicated Jobs start.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.startupPolicy is immutable"
	StartupPolicy *StartupPolicy `json:"startupPolicy,omitempty"`

	// suspend suspends every child Job while true.
	//
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// coordinator names the Pod whose stable network endpoint is published to
	// every Job and Pod in the jobset.sigs.k8s.io/coordinator annotation and
	// label.
	//
	// +optional
	Coordinator *Coordinator `json:"coordinator,omitempty"`

	// managedBy names the controller that reconciles this JobSet. This
	// controller reconciles JobSets without the field and those set to
	// jobset.sigs.k8s.io/jobset-controller, and leaves all others alone.
	// The value is a domain-prefixed path (example.com/controller) of at
	// most 63 characters.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.managedBy is immutable"
	ManagedBy *string `json:"managedBy,omitempty"`

	// ttlSecondsAfterFinished deletes the JobSet that many seconds after it
	// completed or failed. Unset keeps it; zero deletes it at once.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// volumeClaimPolicies are PersistentVolumeClaims shared by the Pods of
	// every replicated Job, created from templates before the Jobs: one
	// claim <template>-<jobset> per template, which every Pod whose
	// containers or init containers mount the template's name gets as a
	// volume of that name. No Pod template may declare a volume of that
	// name. A claim that exists already is used if it has the template's
	// spec and whenDeleted is Retain.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.volumeClaimPolicies is immutable"
	VolumeClaimPolicies []VolumeClaimPolicy `json:"volumeClaimPolicies,omitempty"`
}

// ReplicatedJob is a Job template and the number of Jobs made from it.
type ReplicatedJob struct {
	// name of the replicated Job, unique in the JobSet; it is part of the
	// names of its Jobs and Pods.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// groupName is the group this replicated Job belongs to; Jobs of one group
	// are numbered together (jobset.sigs.k8s.io/job-group-index).
	//
	// +optional
	// +kubebuilder:default=default
	GroupName string `json:"groupName,omitempty"`

	// template of the Jobs.
	Template batchv1.JobTemplateSpec `json:"template"`

	// replicas is the number of Jobs made from the template.
	//
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas,omitempty"`

	// dependsOn names earlier replicated Jobs that must each reach a status
	// before this one is created. At most five entries; the first replicated
	// Job cannot depend on anything.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.replicatedJobs[].dependsOn is immutable"
	DependsOn []DependsOn `json:"dependsOn,omitempty"`
}

// DependsOn is a dependency on an earlier replicated Job.
type DependsOn struct {
	// name of the earlier replicated Job.
	Name string `json:"name"`

	// status the earlier replicated Job must reach: Ready (every Job ready,
	// succeeded or failed) or Complete (every Job succeeded).
	Status DependsOnStatus `json:"status"`
}

// DependsOnStatus is the status a dependency must reach.
//
// +kubebuilder:validation:Enum=Ready;Complete
type DependsOnStatus string

const (
	// DependencyReady is reached when ready + succeeded + failed Jobs equal
	// the replicas of the dependency.
	DependencyReady DependsOnStatus = "Ready"
	// DependencyComplete is reached when every Job of the dependency succeeded.
	DependencyComplete DependsOnStatus = "Complete"
)

// Network configures the headless Service of the JobSet.
type Network struct {
	// enableDNSHostnames gives every Pod the DNS name
	// <jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>.
	// Defaults to true.
	//
	// +optional
	EnableDNSHostnames *bool `json:"enableDNSHostnames,omitempty"`

	// subdomain is the name of the headless Service. Defaults to the JobSet
	// name.
	//
	// +optional
	Subdomain string `json:"subdomain,omitempty"`

	// publishNotReadyAddresses publishes DNS records of Pods before they are
	// ready. Defaults to true.
	//
	// +optional
	PublishNotReadyAddresses *bool `json:"publishNotReadyAddresses,omitempty"`
}

// Operator says whether all or any of the selected Jobs must match.
//
// +kubebuilder:validation:Enum=All;Any
type Operator string

const (
	// OperatorAll requires every selected Job.
	OperatorAll Operator = "All"
	// OperatorAny requires any one selected Job.
	OperatorAny Operator = "Any"
)

// SuccessPolicy says when the JobSet has succeeded.
type SuccessPolicy struct {
	// operator: All selected Jobs must complete, or Any one of them.
	Operator Operator `json:"operator"`

	// targetReplicatedJobs selects the replicated Jobs; empty selects all.
	//
	// +optional
	// +listType=atomic
	TargetReplicatedJobs []string `json:"targetReplicatedJobs,omitempty"`
}

// FailurePolicy says how the JobSet reacts to Job failures.
type FailurePolicy struct {
	// maxRestarts is the number of counted restarts allowed: with N, the
	// JobSet restarts at most N times and the next counted failure fails it
	// with reason ReachedMaxRestarts. In-place restarts and recreations count
	// alike; RestartJobSetAndIgnoreMaxRestarts restarts do not count.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxRestarts int32 `json:"maxRestarts,omitempty"`

	// restartStrategy is how the JobSet restarts: Recreate (delete and
	// recreate every Job), BlockingRecreate (recreate only once every Job and
	// Pod of the previous attempt is gone) or InPlaceRestart (restart the
	// containers of healthy Pods in place, recreate only failed Pods).
	// InPlaceRestart binds the Pods' service account to the agents' Role; it
	// may then change no Pod but its own Pod's epoch: use one no other
	// workload uses.
	//
	// +optional
	// +kubebuilder:default=Recreate
	RestartStrategy JobSetRestartStrategy `json:"restartStrategy,omitempty"`

	// rules are evaluated in order for a Job failure; the first match decides
	// the action. With no match the action is RestartJobSet.
	//
	// +optional
	// +listType=atomic
	Rules []FailurePolicyRule `json:"rules,omitempty"`
}

// JobSetRestartStrategy is how a JobSet restarts.
//
// +kubebuilder:validation:Enum=Recreate;BlockingRecreate;InPlaceRestart
type JobSetRestartStrategy string

const (
	// Recreate deletes every Job and creates each again as soon as its
	// previous incarnation and its Pods are gone.
	Recreate JobSetRestartStrategy = "Recreate"

	// BlockingRecreate deletes every Job and creates none until every Job and
	// Pod of the previous attempt is gone.
	BlockingRecreate JobSetRestartStrategy = "BlockingRecreate"

	// InPlaceRestart restarts healthy Pods in place and recreates only failed
	// Pods, coordinated by the epoch protocol. When a Job fails, the matching
	// failure-policy rule runs with Recreate semantics.
	InPlaceRestart JobSetRestartStrategy = "InPlaceRestart"
)

// FailurePolicyAction is what the controller does for a matched rule.
//
// +kubebuilder:validation:Enum=FailJobSet;RestartJobSet;RestartJobSetAndIgnoreMaxRestarts;RestartJob;RestartJobAndIgnoreMaxRestarts
type FailurePolicyAction string

const (
	// FailJobSet fails the JobSet at once.
	FailJobSet FailurePolicyAction = "FailJobSet"

	// RestartJobSet restarts the whole JobSet if counted restarts are below
	// maxRestarts, and fails it otherwise. Counts towards maxRestarts.
	RestartJobSet FailurePolicyAction = "RestartJobSet"

	// RestartJobSetAndIgnoreMaxRestarts restarts the whole JobSet without
	// counting towards maxRestarts.
	RestartJobSetAndIgnoreMaxRestarts FailurePolicyAction = "RestartJobSetAndIgnoreMaxRestarts"

	// RestartJob recreates only the failed Job if counted restarts are below
	// maxRestarts, and fails the JobSet otherwise. Counts towards maxRestarts.
	RestartJob FailurePolicyAction = "RestartJob"

	// RestartJobAndIgnoreMaxRestarts recreates only the failed Job without
	// counting towards maxRestarts.
	RestartJobAndIgnoreMaxRestarts FailurePolicyAction = "RestartJobAndIgnoreMaxRestarts"
)

// FailurePolicyRule is an action taken for Job failures that match all of
// its requirements.
type FailurePolicyRule struct {
	// name of the rule, unique in the policy. Defaults to failurePolicyRuleN,
	// N being the rule's index.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`
	Name string `json:"name,omitempty"`

	// action taken when the rule matches.
	Action FailurePolicyAction `json:"action"`

	// onJobFailureReasons matches the reason of the Job's Failed condition:
	// PodFailurePolicy, BackoffLimitExceeded, DeadlineExceeded,
	// MaxFailedIndexesExceeded or FailedIndexes. Empty matches any reason.
	//
	// +optional
	// +listType=set
	OnJobFailureReasons []string `json:"onJobFailureReasons,omitempty"`

	// onJobFailureMessagePatterns are RE2 regular expressions matched against
	// the message of the Job's Failed condition; any match satisfies the
	// requirement. Empty matches any message.
	//
	// +optional
	// +listType=set
	OnJobFailureMessagePatterns []string `json:"onJobFailureMessagePatterns,omitempty"`

	// targetReplicatedJobs limits the rule to failures of these replicated
	// Jobs. Empty applies to all.
	//
	// +optional
	// +listType=atomic
	TargetReplicatedJobs []string `json:"targetReplicatedJobs,omitempty"`
}

// StartupPolicyOptions is the order replicated Jobs start in.
//
// +kubebuilder:validation:Enum=AnyOrder;InOrder
type StartupPolicyOptions string

const (
	// AnyOrder starts every replicated Job at once. The default.
	AnyOrder StartupPolicyOptions = "AnyOrder"
	// InOrder starts the replicated Jobs in spec order, each once every Job
	// of the previous one is ready.
	InOrder StartupPolicyOptions = "InOrder"
)

// StartupPolicy says in what order replicated Jobs start.
type StartupPolicy struct {
	// startupPolicyOrder is AnyOrder or InOrder.
	StartupPolicyOrder StartupPolicyOptions `json:"startupPolicyOrder"`
}

// Coordinator names one Pod of the JobSet as its coordinator.
type Coordinator struct {
	// replicatedJob holding the coordinator Pod.
	ReplicatedJob string `json:"replicatedJob"`

	// jobIndex of the Job holding the coordinator Pod.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	JobIndex int `json:"jobIndex,omitempty"`

	// podIndex is the completion index of the coordinator Pod in that Job.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	PodIndex int `json:"podIndex,omitempty"`
}

// VolumeClaimPolicy declares PersistentVolumeClaims shared by the JobSet's
// Pods and what happens to them when the JobSet is deleted.
//
// +kubebuilder:validation:XValidation:rule="!has(self.templates) || self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)",message="spec.volumeClaimPolicies[].templates[].metadata.namespace must not be set: claims live in the JobSet's namespace"
type VolumeClaimPolicy struct {
	// templates of the claims; a claim is named <template>-<jobset>, and
	// its name must be unique across every policy of the JobSet.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Templates []corev1.PersistentVolumeClaim `json:"templates,omitempty"`

	// retentionPolicy says what happens to the claims. Defaults to
	// whenDeleted: Delete.
	//
	// +optional
	RetentionPolicy *VolumeRetentionPolicy `json:"retentionPolicy,omitempty"`
}

// VolumeRetentionPolicy is the lifecycle of shared claims.
type VolumeRetentionPolicy struct {
	// whenDeleted: Delete (the default) removes the claims with the JobSet;
	// Retain keeps them.
	//
	// +optional
	// +kubebuilder:default=Delete
	WhenDeleted *RetentionPolicyType `json:"whenDeleted,omitempty"`
}

// RetentionPolicyType is Delete or Retain.
//
// +kubebuilder:validation:Enum=Delete;Retain
type RetentionPolicyType string

const (
	// RetentionPolicyDelete deletes the claims with the JobSet.
	RetentionPolicyDelete RetentionPolicyType = "Delete"
	// RetentionPolicyRetain keeps the claims after the JobSet is deleted.
	RetentionPolicyRetain RetentionPolicyType = "Retain"
)

// JobSetStatus is the observed state of a JobSet.
type JobSetStatus struct {
	// conditions: Completed, Failed, Suspended, StartupPolicyInProgress,
	// StartupPolicyCompleted and RestartingJobSet.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// restarts counts every restart of the whole JobSet, in place or by
	// recreation.
	//
	// +optional
	Restarts int32 `json:"restarts"`

	// inPlaceRestarts counts the restarts among status.restarts that were
	// done in place; the others recreated the Jobs.
	//
	// +optional
	InPlaceRestarts int32 `json:"inPlaceRestarts,omitempty"`

	// restartsCountTowardsMax counts the restarts that count towards
	// spec.failurePolicy.maxRestarts.
	//
	// +optional
	RestartsCountTowardsMax int32 `json:"restartsCountTowardsMax,omitempty"`

	// terminalState is Completed or Failed once the JobSet has finished.
	//
	// +optional
	TerminalState string `json:"terminalState,omitempty"`

	// replicatedJobsStatus counts the Jobs of each replicated Job by state.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	ReplicatedJobsStatus []ReplicatedJobStatus `json:"replicatedJobsStatus,omitempty"`

	// deprecatedEpoch is the most recent deprecated epoch of the in-place
	// restart protocol: an agent whose epoch is at or below it restarts its
	// Pod in place. Written by the controller.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	DeprecatedEpoch int32 `json:"deprecatedEpoch,omitempty"`

	// syncedEpoch is the most recent epoch every expected Pod reported: an
	// agent at this epoch lifts its barrier so that its workers start.
	// Written by the controller.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	SyncedEpoch int32 `json:"syncedEpoch,omitempty"`

	// previousInPlaceRestartAttempt is upstream JobSet's name for the
	// deprecated epoch, counted from 0: deprecatedEpoch - 1, unset while
	// deprecatedEpoch is 0. An agent written for upstream JobSet whose
	// attempt is at or below it restarts its Pod in place. Written by the
	// controller, in step with deprecatedEpoch.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	PreviousInPlaceRestartAttempt *int32 `json:"previousInPlaceRestartAttempt,omitempty"`

	// currentInPlaceRestartAttempt is upstream JobSet's name for the synced
	// epoch, counted from 0: syncedEpoch - 1, unset while syncedEpoch is 0.
	// An agent written for upstream JobSet whose attempt equals it lifts its
	// barrier. Written by the controller, in step with syncedEpoch.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	CurrentInPlaceRestartAttempt *int32 `json:"currentInPlaceRestartAttempt,omitempty"`

	// syncedPods is how many Pods synced at syncedEpoch: the size of the
	// in-place restart group at its last sync. When the expected Pods
	// differ from it (parallelism and completions scaled), the group
	// restarts in place at its new size, a restart that does not count
	// towards maxRestarts. Written by the controller.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	SyncedPods int32 `json:"syncedPods,omitempty"`
}

// ReplicatedJobStatus counts the Jobs of one replicated Job by state.
type ReplicatedJobStatus struct {
	// name of the replicated Job.
	Name string `json:"name"`

	// ready Jobs: ready plus succeeded Pods reach the Job's expected Pods.
	Ready int32 `json:"ready"`

	// succeeded Jobs.
	Succeeded int32 `json:"succeeded"`

	// failed Jobs.
	Failed int32 `json:"failed"`

	// active Jobs: at least one Pod pending or running, not being deleted.
	Active int32 `json:"active"`

	// suspended Jobs.
	Suspended int32 `json:"suspended"`

	// jobRestarts[i] counts RestartJob and RestartJobAndIgnoreMaxRestarts
	// recreations of the Job with index i.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	JobRestarts []int32 `json:"jobRestarts,omitempty"`

	// jobRestartsCountTowardsMax[i] counts the RestartJob recreations of the
	// Job with index i, which count towards maxRestarts.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	JobRestartsCountTowardsMax []int32 `json:"jobRestartsCountTowardsMax,omitempty"`
}

// JobSetConditionType is the type of a JobSet condition.
type JobSetConditionType string

// Condition types of a JobSet.
const (
	// JobSetCompleted is True once the success policy is met.
	JobSetCompleted JobSetConditionType = "Completed"
	// JobSetFailed is True once the JobSet has failed for good.
	JobSetFailed JobSetConditionType = "Failed"
	// JobSetSuspended is True while spec.suspend is true.
	JobSetSuspended JobSetConditionType = "Suspended"
	// JobSetStartupPolicyInProgress is True while an InOrder startup runs.
	JobSetStartupPolicyInProgress JobSetConditionType = "StartupPolicyInProgress"
	// JobSetStartupPolicyCompleted is True once an InOrder startup finished.
	JobSetStartupPolicyCompleted JobSetConditionType = "StartupPolicyCompleted"
	// JobSetRestarting is True while a restart of the JobSet is under way.
	JobSetRestarting JobSetConditionType = "RestartingJobSet"
	// JobSetImagePullFailure is True while Pods of an InPlaceRestart JobSet
	// wait for an image the kubelet cannot pull, the agent's or a
	// worker's: the group cannot start, and the Pods alone say why. Not
	// upstream JobSet's. It never fails the JobSet: the kubelet keeps
	// retrying, and the image may become available.
	JobSetImagePullFailure JobSetConditionType = "ImagePullFailure"
)

// TerminalState values of status.terminalState.
const (
	TerminalStateCompleted = string(JobSetCompleted)
	TerminalStateFailed    = string(JobSetFailed)
)
