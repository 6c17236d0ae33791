// Package stats summarizes benchmark samples and writes results as a table
// and as JSON.
//
// Benchmark code: it may import any package of the module, test/'s harness
// included, and no package outside perf/ may import it.
package stats
