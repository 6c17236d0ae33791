// Package reconciler keeps the policy engine in step with the
// JobSetPolicy objects: it compiles each one, puts it in force, reports
// compile errors in its status (keeping the last good version in force),
// and audits existing JobSets periodically.
//
// Every manager replica runs the reconciler, because every replica serves
// admission; only the leader runs the audit.
//
// It compiles through policies/jobsetpolicy, as the webhook does.
//
// Imports: the policy engine, the APIs and controller-runtime. It never
// imports the JobSet controller, the webhook or the agent.
package reconciler
