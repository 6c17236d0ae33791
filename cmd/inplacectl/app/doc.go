// Package app is inplacectl: offline tools that run the same code as the
// webhooks — it renders what the mutating webhook would store, evaluates
// policies against a manifest, runs Rego tests and policy suites, and
// describes a JobSetPolicy's parameters — and `status`, which reads a
// JobSet's in-place restart state from a cluster.
//
// Imports: the webhook's and the policy engine's code, to run them offline,
// and a client only for `status`. It never imports the controller, so that
// rendering and policy tests need no cluster.
package app
