// Package wrappers holds builders for the objects tests create, so that a test
// states only what matters to it:
//
//	wrappers.MakeJobSet("js", ns).
//		ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Parallelism(4).Obj()).
//		FailurePolicy(&jobsetv1alpha2.FailurePolicy{MaxRestarts: 3}).
//		Obj()
//
// Builders are additive (Label adds one label) and Obj returns the object
// itself; Clone copies a builder before diverging.
//
// Test code: it may import any package of the module, and no package outside
// test/ and perf/ (the benchmarks) may import it.
package wrappers
