// Package deploy installs config/ onto the local cluster as a platform team
// would, but with the manager running in this process: the local install
// (local.go), checked against the objects of config/default. Tests and
// the local cluster run the manager with the identity it gets here, so
// config/rbac is proven to be enough.
//
// Test code: it may import any package of the module, and no package outside
// test/ and perf/ (the benchmarks) may import it.
package deploy
