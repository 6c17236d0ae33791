// Package e2e runs inplace end to end on the local cluster: the real control
// plane, inplace-manager with its webhooks over TLS, and simulated nodes
// running the real agent in every Pod. Every seed user story is a spec here.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package e2e
