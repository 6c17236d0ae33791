// Package restartbench measures JobSet restarts on the local cluster: a
// real control plane, inplace-manager as installed (its RBAC, webhooks and
// the agents' admission policy) and simulated nodes running the real agent
// in every Pod, one worker Pod per node. It times an in-place restart
// against Recreate and BlockingRecreate after a worker exit or a Pod
// deletion, measures the machine's floor for the API work an in-place
// restart needs, and counts the requests each actor sends.
//
// `make bench-restart` runs it (perf/bench/restart); a small configuration
// runs in `make test` as a smoke test.
//
// Benchmark code: it may import any package of the module, test/'s harness
// included, and no package outside perf/ may import it.
package restartbench
