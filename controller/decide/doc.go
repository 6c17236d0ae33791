// Package decide is the JobSet controller's decisions: Decide takes a
// defaulted JobSet and what the reconciler observed of its children
// (Observed, with the family of controller/state) and returns the Plan of
// one reconcile, without I/O: the Jobs to create, delete, suspend, resume
// or scale, the Service and claims to create, the Pods that must be
// deleted, the status, the broadcast and the Events.
//
//	plan.go              Decide: the whole plan of one reconcile
//	restartstate.go      the table of transitions between restart states (jobset.RestartStateOf), each row with its guard and effect, and apply, the one way Decide moves a JobSet
//	epochs.go            the epoch protocol: which epoch is synced or deprecated, which barriers open
//	failure_policy.go    rule matching and the restart or failure it causes
//	success_policy.go    All / Any over target replicated Jobs
//	startup_policy.go    InOrder and dependsOn gating and their conditions
//	image_pull.go        the ImagePullFailure condition: Pods waiting for an image the kubelet cannot pull
//	jobs.go, service.go  the desired Jobs and Service, and a suspended Job resumed
//	exclusive.go         exclusive placement: Pod affinities or node selectors per Job
//	priority.go          the Pods' priority label, as the API server resolves their PriorityClass
//	agent_grants.go      the Jobs of a new InPlaceRestart JobSet held back until its agents' grants name it
//	volume_claims.go     the claims of spec.volumeClaimPolicies
//	scaling.go           elastic replicated jobs: which Jobs to patch to a new size
//	status.go            replicatedJobsStatus and condition helpers
//	status_write.go      when a status write of counters alone may wait
//	upstream.go          the epochs and in-place restarts of a JobSet taken over from upstream JobSet, carried over
//	ttl.go               ttlSecondsAfterFinished
//	reasons.go           condition reasons and messages
//
// Every decision is a function of what it is given: the tests call Decide
// on JobSets and children they build, check that it changed neither, and
// check that it moves a JobSet only by applying rows of the table of
// transitions, one after another from where the JobSet stood.
//
// Imports: the APIs (api/...), the protocol's wire format (api/protocol)
// and controller/state; never client-go or controller-runtime
// (layout_test.go and docs/layout_test.go check), and never package
// controller, which calls it.
package decide
