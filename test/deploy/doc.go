// Package deploy installs parts of config/ onto the local cluster as a
// platform team would: the manager's RBAC and service account, the agents'
// admission policy. Tests and the local cluster run the manager with the
// identity it gets here, so config/rbac is proven to be enough.
//
// Test code: it may import any package of the module, and no package outside
// test/ and perf/ (the benchmarks) may import it.
package deploy
