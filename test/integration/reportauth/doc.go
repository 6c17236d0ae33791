// Package reportauth tests the verification of the agents' report tokens
// (controller/reports/token) against a real kube-apiserver: its discovery
// documents read with no more rights than the manager's, and the tokens
// the TokenRequest API issues, bound to a Pod, to a Secret or to nothing.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package reportauth
