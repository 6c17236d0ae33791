// Package offline answers, without a cluster, what the API server with the
// project's CustomResourceDefinition and webhooks answers to the creation
// of a JobSet: the same steps in the same order, with the API server's own
// schema code and the webhooks' own code, and the same text when it
// refuses. `inplacectl render` is built on it.
//
// It must never import the controller, the agent or cmd; the webhook
// package must never import it (nor the API server's schema code), so that
// the manager's binary does not carry what only the CLI needs.
package offline
