// Package stats summarizes benchmark samples and writes results as a table
// and as JSON.
//
// Test code: it may import any package of the module, and no package outside
// test/ may import it.
package stats
