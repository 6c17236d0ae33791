// Package upstreamjobset installs and runs upstream JobSet, as
// hack/upstream-jobset pins it, in the local cluster: its controller from
// its module's manifests, its in-place restart agent and its examples.
// The upstream e2e suite and the restart benchmark share it, so that the
// controller measured beside inplace's is the one the tests run.
//
// Test code: it may import any package of the module, and no package outside
// test/ and perf/ (the benchmarks) may import it.
package upstreamjobset
