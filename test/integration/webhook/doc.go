// Package webhook tests the admission webhooks served over TLS to a real
// kube-apiserver: defaulting, injection, the built-in and admin policies.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package webhook
