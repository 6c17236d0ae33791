// Package coexist decides whether the JobSet controller may run beside
// what is installed: upstream JobSet's CRD, which serves the same kind but
// prunes our status fields, and upstream JobSet's controller, which would
// reconcile the same JobSets and Jobs as ours. It is pure: the manager
// (controller/upstream_gate.go) and `inplacectl migrate`
// (cmd/inplacectl/migration) read the CRD and the Leases, and this package
// says what they mean, so that both say the same.
//
//	names.go    upstream's names: its Leases, Deployments, webhook configurations; the command applying our CRD
//	crd.go      the installed JobSet CRD: ours or not, which of our status fields it lacks
//	lease.go    whether a Lease is held now
//	served.go   whether the API server serves the CRD's schema yet: the dry-run status write and what its answer dropped
//	decide.go   the verdict: hold the controller or let it run, with the reason and the fix
//	unread.go   the verdict while the reads fail: the last one for a grace period, then hold
//
// Imports: the JobSet API and the API types of Kubernetes; never a client,
// controller-runtime or package controller, which calls it.
package coexist
