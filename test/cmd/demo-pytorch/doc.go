// Command demo-pytorch runs examples/pytorch on the running local cluster
// with real nodes, as a person would: the nodes, the training log, a crash
// of one rank (kubectl exec), the timeline of the restart (crash, agents
// restarted, barrier lifted, workers started, process group re-formed,
// first step after the resume), then the same with Recreate, and the
// training each way lost. With -repeats and -json it is the benchmark of
// `make bench-pytorch`. `make demo-pytorch` starts the cluster and builds
// the image first.
//
// Test code: it may import any package of the module, and no package outside
// test/ may import it.
package main
