// Package tutorial runs docs/tutorials/first-in-place-jobset.md as a reader
// does: the ```sh block of every numbered step, in order, each in sh -c at
// the root of the repository, on the local cluster with simulated nodes
// that `make cluster-up` starts, and checks that each block prints the
// output block the page shows after it. A section without a number ("Run
// it on real nodes", say) is not run: it names no command to run.
//
// Test code: it imports the harness (test/cluster) and any package of the
// module; nothing imports it.
package tutorial
