// Package controller runs the lifecycle of JobSets: it creates their child
// Jobs and headless Service, keeps their status, and carries out the
// failure, success and startup policies.
//
// It is the I/O around two packages: controller/state, what is known of
// a JobSet's children, and controller/decide, what to do about them, a
// pure function of the JobSet and what was observed. The reconciler only
// reads, calls decide.Decide, and acts:
//
//	reconciler.go        Reconcile: get → skip → observe → decide → act → status → Events
//	observe.go           reads the JobSet's family from the child index, the rest from label-selected caches, and what earlier reconciles left
//	enqueue.go, signals.go  which child events are reconciled at once and which are batched
//	agent_rbac.go        the agents' Role and RoleBinding in a JobSet's namespace
//	agent_rbac_sync.go   their controller, one request per namespace, apart from the JobSet controller
//	agent_rbac_gate.go   whether they name a JobSet, read for decide, and the new JobSets their change reconciles
//	metrics.go           restart counts, durations, epochs and image pull failures, on the registry Setup is given
//	upstream_gate.go     holds every reconcile back while upstream JobSet's controller runs or the CRD is not ours (controller/coexist decides)
//	upstream_served.go   and until the API server serves the CRD's schema, seen in a dry-run status write
//	state/               the child index, a JobSet's family, its Jobs by attempt, the Pod observation, the expectations, the restarts held back
//	decide/              the plan of one reconcile: Jobs, Service, claims, status, failure, success and startup policies, epochs
//	podfailure/          a Job's podFailurePolicy evaluated as the Job controller evaluates it
//	reports_events.go    the agents' direct reports fed to the child index and the queue as their Pods' changes
//	reports/             the leader's report endpoint and the store of reports (soft state)
//
// A restart is recorded first (status.restarts or a Job's individual restart
// counter goes up, written with the resourceVersion that was read so that a
// stale decision cannot land twice); the next reconcile then sees the Jobs of
// the old attempt as outdated, deletes them, and creates the new ones:
//
//	Job fails ──▶ status.restarts++ ──▶ old Jobs deleted (foreground) ──▶ new Jobs created in startup order
//
// Imports: the APIs (api/...), the protocol's wire format (api/protocol),
// controller/state, controller/decide and controller/reports, client-go
// and controller-runtime. It never imports the webhook (except
// webhook/certs, through controller/reports: the report endpoint's CA),
// the policy engine or the agent: the controller decides from the JobSet
// and its children, and what the agents need from it crosses the API
// server or the report endpoint.
package controller
