// Package migration tests the migration from upstream JobSet of
// docs/how-to/migrate-from-jobset.md on a real kube-apiserver and etcd
// (envtest) holding upstream's CRD (test/testdata/upstream-jobset), the
// rest of upstream's install (its release manifests, rendered from its
// module) and JobSets with their Jobs and Service as upstream's controller
// leaves them: the manager holding back while upstream's Lease is held and
// its CRD installed, `inplacectl migrate` listing what blocks, the
// documented kubectl commands run with bin/kubectl, every JobSet kept and
// taken over, and what is left of upstream removed.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package migration
