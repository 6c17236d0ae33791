// Package app is inplacectl, and the kubectl plugin kubectl-inplace:
// offline tools that run the same code as the webhooks — it renders what
// the mutating webhook would store, evaluates policies against a manifest,
// runs Rego tests and policy suites, and describes a JobSetPolicy's
// parameters — and `status`, which reads a JobSet's in-place restart state
// from a cluster.
//
// It is a cobra command tree with kubectl's conventions: NewCommand builds
// the root, which holds cli-runtime's ConfigFlags (--kubeconfig, --context,
// -n, ...) and the streams in a rootOptions; each subcommand is
// newXCommand(o *rootOptions) in a file of its own, listed in subcommands.
// Execute maps errors to exit statuses: 1 for a refusal or a failure, 2 for
// bad usage.
//
// Imports: the webhook's and the policy engine's code, to run them offline,
// and a client only for `status` and shell completion. It never imports
// the controller, so that rendering and policy tests need no cluster.
package app
