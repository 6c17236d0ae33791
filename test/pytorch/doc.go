// Package pytorch is examples/pytorch as the end-to-end suite, the demo and
// the benchmark use it: the example's objects as a user applies them, the
// changes each run makes to them, and what its logs say (losses,
// checkpoints, resumptions, and the times of a restart's stages).
//
// Test code: no package outside test/ and perf/ may import it.
package pytorch
