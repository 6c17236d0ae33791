// Package cluster tests the local cluster itself: the control plane
// comes up, serves, and stops without leaving a process behind.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package cluster
