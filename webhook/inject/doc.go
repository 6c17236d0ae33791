// Package inject turns a JobSet that says `restartStrategy: InPlaceRestart`
// into one that can restart in place: it adds the agent sidecar, the
// container restart rules of the workers and the Job settings the protocol
// needs. It is pure: the mutating webhook and `inplacectl render` call it
// alike.
//
// Injection respects what the user wrote: an agent the user added is kept
// (and validated by the policies), a container with its own restart rules is
// left alone, and Job settings already set are not overwritten — a wrong
// value is denied by the built-in policies with the fix in the message
// rather than silently replaced. Running it twice gives the same object.
//
// Imports: the APIs (api/...) and controller/podfailure (which exit codes
// the podFailurePolicy makes fatal). It is pure: it never imports a client,
// controller-runtime, the agent or the policy engine.
package inject
