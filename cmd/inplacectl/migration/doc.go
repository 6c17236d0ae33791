// Package migration is `inplacectl migrate` (`kubectl inplace migrate`):
// what blocks moving a cluster from upstream JobSet to inplace, and what
// is done, step by step as docs/how-to/migrate-from-jobset.md takes them.
//
//	gather.go   reads the cluster (the only file that talks to it): the CRD, upstream's Leases, Deployments and webhook configurations, inplace's Deployments, every JobSet and its Jobs
//	check.go    the findings, a pure function of what was read: blocking, done, or a warning
//	jobsets.go  what of each JobSet changes when inplace takes it over (fields our CRD drops, exclusive placement, a restart under way, Jobs that would be recreated)
//	report.go   the findings as text
//
// What upstream's presence means (its Lease held, the CRD ours or not) is
// controller/coexist's, which the manager judges by too.
//
// Imports: the JobSet API, config/crd (our schema), controller/coexist and
// controller-runtime's client; never the controller or the agent.
package migration
