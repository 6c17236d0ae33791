// Package podfailure evaluates a Job's podFailurePolicy for a container exit
// the way the Kubernetes Job controller does: rules in order, the first one
// whose onExitCodes requirement matches decides. The controller asks it
// whether a worker's exit fails the Job (so that the exit is never turned
// into an in-place restart); injection asks it which exit codes must be left
// out of the workers' RestartAllContainers rule.
//
// It is pure: it imports only k8s.io/api types, never a client, the
// controller or the webhook.
package podfailure
