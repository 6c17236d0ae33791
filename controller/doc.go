// Package controller runs the lifecycle of JobSets: it creates their child
// Jobs and headless Service, keeps their status, and carries out the
// failure, success and startup policies.
//
// Decisions are pure functions of the JobSet and what was observed; the
// reconciler only reads, calls decide, and acts:
//
//	reconciler.go        Reconcile: get → skip → observe → decide → act → status → Events
//	observe.go           reads the JobSet's family from the child index, the rest from label-selected caches
//	state/               the child index, a JobSet's family, its Jobs by attempt, the Pod observation, the expectations
//	plan.go              decide: the whole plan of one reconcile, without I/O
//	jobs.go, service.go  the desired Jobs and Service
//	status.go            replicatedJobsStatus and condition helpers
//	failure_policy.go    rule matching and the restart or failure it causes
//	success_policy.go    All / Any over target replicated Jobs
//	startup_policy.go    InOrder and dependsOn gating and their conditions
//	ttl.go               ttlSecondsAfterFinished
//	restartstate.go      the restart path's states and the table of transitions decide may make
//	epochs.go            the epoch protocol: which epoch is synced or deprecated, which barriers open
//	enqueue.go, signals.go  which child events are reconciled at once and which are batched
//	status_write.go      when a status write of counters alone may wait
//	agent_rbac.go        the agents' Role and RoleBinding in a JobSet's namespace
//	agent_rbac_sync.go   their controller, one request per namespace, apart from the JobSet controller
//	metrics.go           restart counts, durations and epochs, on the registry Setup is given
//	reasons.go           condition reasons and messages
//
// A restart is recorded first (status.restarts or a Job's individual restart
// counter goes up, written with the resourceVersion that was read so that a
// stale decision cannot land twice); the next reconcile then sees the Jobs of
// the old attempt as outdated, deletes them, and creates the new ones:
//
//	Job fails ──▶ status.restarts++ ──▶ old Jobs deleted (foreground) ──▶ new Jobs created in startup order
//
// Imports: the APIs (api/...), the protocol's wire format (api/protocol),
// podFailurePolicy matching (controller/podfailure), client-go and
// controller-runtime. It never imports the webhook, the policy engine or
// the agent: the controller decides from the JobSet and its children, and
// what the agents need from it crosses the API server.
package controller
