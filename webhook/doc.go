// Package webhook serves the admission webhooks of JobSets.
//
// The mutating webhook applies the defaults, the InPlaceRestart injection
// (package inject) and the patch rules of admin policies, until the object
// stops changing; the validating webhook runs every policy (package
// policies) and turns deny into a rejection, warn into warnings for the
// client and DryRun into a metric and an Event. Checks form a chain: every
// link adds its messages and the request is judged on all of them, so a
// user sees every problem at once.
//
// Both run a stage of Pipeline, the admission pipeline: the review made
// into the policies' input (policies/review), mutate, evaluate. Its Admit
// runs the stages in order for webhook/offline, the policy suites and
// `inplacectl policy eval`, so that an offline verdict is the cluster's.
//
// Imports: the policy engine, injection (webhook/inject), the certificates
// (webhook/certs), the APIs and controller-runtime. It never imports the
// JobSet controller or the agent.
package webhook
