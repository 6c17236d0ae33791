// Command demo runs the main job on the local cluster (make cluster-up): a
// JobSet of 2 replicated jobs × 8 workers that says only
// `restartStrategy: InPlaceRestart`, one worker exits non-zero, and the
// recovery is printed as a timeline; then the same with Recreate, and both
// totals side by side.
//
// Test code: it may import any package of the module, and no package outside
// test/ may import it.
package main
