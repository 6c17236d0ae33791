// Command restart is `make bench-restart`: JobSet restarts on the local
// cluster, in place against Recreate and BlockingRecreate, against the
// machine's floor, with the API cost per restart. It prints a table and
// writes JSON.
//
// Test code: it may import any package of the module, and no package outside
// test/ may import it.
package main
