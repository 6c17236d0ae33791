package v1alpha2

// Reserved labels and annotations. They carry the same names and meanings as
// upstream JobSet so that schedulers, dashboards and workloads written for it
// keep working. Unless noted otherwise, the controller sets each key both as a
// label and as an annotation on child Jobs and on their Pod templates.
const (
	// JobSetNameKey holds the name of the owning JobSet.
	JobSetNameKey = "jobset.sigs.k8s.io/jobset-name"

	// JobSetUIDKey holds the UID of the owning JobSet; it tells a child of the
	// current JobSet apart from a child of a deleted JobSet of the same name.
	JobSetUIDKey = "jobset.sigs.k8s.io/jobset-uid"

	// ReplicatedJobNameKey holds the name of the replicated Job a child belongs to.
	ReplicatedJobNameKey = "jobset.sigs.k8s.io/replicatedjob-name"

	// ReplicatedJobReplicasKey holds spec.replicatedJobs[].replicas of that
	// replicated Job.
	ReplicatedJobReplicasKey = "jobset.sigs.k8s.io/replicatedjob-replicas"

	// GlobalReplicasKey holds the total number of Jobs of the JobSet, the sum
	// of spec.replicatedJobs[].replicas.
	GlobalReplicasKey = "jobset.sigs.k8s.io/global-replicas"

	// JobIndexKey holds the index of a Job within its replicated Job, from 0 to
	// replicas-1.
	JobIndexKey = "jobset.sigs.k8s.io/job-index"

	// JobGlobalIndexKey holds an index of the Job unique in the whole JobSet,
	// from 0 to the number of Jobs minus one, in spec order.
	JobGlobalIndexKey = "jobset.sigs.k8s.io/job-global-index"

	// JobKey holds the SHA-1 (hex) of the namespaced Job name; it identifies a Job
	// in label selectors, where the name itself may be too long.
	JobKey = "jobset.sigs.k8s.io/job-key"

	// RestartsKey holds the restart attempt the Job was created for:
	// status.restarts less the in-place restarts among them
	// (RecreateAttempt). Jobs of an older attempt are deleted on restart.
	RestartsKey = "jobset.sigs.k8s.io/restart-attempt"

	// JobRestartAttemptKey holds how many times the Job at this index was
	// recreated alone when the Job was created
	// (status.replicatedJobsStatus[].jobRestarts of its index, JobRestarts).
	// A Job whose value is older is deleted. A Job without it was made by
	// a controller that recreates no Job alone, and counts as never
	// recreated alone (JobRestartAttemptOf).
	JobRestartAttemptKey = "jobset.sigs.k8s.io/job-restart-attempt"

	// GroupNameKey holds spec.replicatedJobs[].groupName.
	GroupNameKey = "jobset.sigs.k8s.io/group-name"

	// GroupReplicasKey holds the total number of Jobs of the group.
	GroupReplicasKey = "jobset.sigs.k8s.io/group-replicas"

	// JobGroupIndexKey holds the index of the Job within its group, from 0 to
	// group-replicas-1.
	JobGroupIndexKey = "jobset.sigs.k8s.io/job-group-index"

	// CoordinatorKey holds the stable network endpoint of the coordinator Pod,
	// <pod hostname>.<subdomain>, when spec.coordinator is set.
	CoordinatorKey = "jobset.sigs.k8s.io/coordinator"

	// EpochKey is a Pod annotation written by the agent sidecar and read by the
	// controller: the Pod's epoch in the in-place restart protocol, a
	// non-negative int32. A Pod whose epoch is at or below
	// status.deprecatedEpoch restarts in place; a Pod whose epoch equals
	// status.syncedEpoch lifts its barrier.
	EpochKey = "jobset.sigs.k8s.io/epoch"

	// InPlaceRestartAttemptKey is upstream JobSet's Pod annotation for the
	// epoch, counted from 0 (attempt = epoch - 1), written by agents written
	// for upstream JobSet. The controller reads it from a Pod that carries
	// no EpochKey.
	InPlaceRestartAttemptKey = "jobset.sigs.k8s.io/in-place-restart-attempt"

	// DisableInPlaceRestartKey, present on a JobSet (whatever its value),
	// turns the in-place restart protocol's agents off, as in upstream
	// JobSet: they lift their barrier at once and never report an epoch. The
	// mutating webhook injects nothing into such a JobSet.
	DisableInPlaceRestartKey = "jobset.sigs.k8s.io/disable-in-place-restart"

	// ExclusiveKey is an annotation on the JobSet or on a replicated Job
	// template: the node label (topology) whose domains each get at most one
	// Job.
	ExclusiveKey = "alpha.jobset.sigs.k8s.io/exclusive-topology"

	// NodeSelectorStrategyKey is an annotation flag; with it, exclusive
	// placement uses node selectors on NamespacedJobKey instead of Pod
	// affinities.
	NodeSelectorStrategyKey = "alpha.jobset.sigs.k8s.io/node-selector"

	// NamespacedJobKey is the node label of exclusive placement with node
	// selectors: namespace and Job name joined by an underscore.
	NamespacedJobKey = "alpha.jobset.sigs.k8s.io/namespaced-job"

	// PriorityKey is the label of a JobSet's Pods that holds their priority,
	// as the API server resolves it from their priorityClassName: exclusive
	// placement by Pod affinities keeps apart only Pods of the same priority.
	PriorityKey = "jobset.sigs.k8s.io/priority"

	// NoScheduleTaintKey is the taint key that exclusive placement with node
	// selectors tolerates.
	NoScheduleTaintKey = "alpha.jobset.sigs.k8s.io/no-schedule"

	// JobSetControllerName is the value of spec.managedBy (or its absence)
	// that this controller reconciles; any other value is left to another
	// controller.
	JobSetControllerName = "jobset.sigs.k8s.io/jobset-controller"
)

// CRDOwnerLabel marks the JobSet CustomResourceDefinition as inplace's, with
// the value CRDOwner (the +kubebuilder:metadata:labels marker of JobSet puts
// it there). Upstream JobSet's CRD serves the same group and kind without
// our status fields, which the API server would then prune from every
// status write: the manager reconciles no JobSet while the CRD's schema
// lacks any of them, and the label tells ours (of an earlier release,
// then) from another's in what it says. A CRD without the label that keeps
// every field holds nothing back (docs/how-to/migrate-from-jobset.md).
const (
	CRDOwnerLabel = "inplace.dev/crd-owner"
	CRDOwner      = "inplace"
)
