// Command restart is `make bench-restart`: JobSet restarts on the local
// cluster, in place against Recreate and BlockingRecreate, against the
// machine's floor, with the API cost per restart. It prints a table and
// writes JSON.
//
// Benchmark code: it may import any package of the module, test/'s harness
// included, and no package outside perf/ may import it.
package main
