// Package testutil holds the builders that the tests of controller,
// controller/state and controller/decide share: a defaulted JobSet of
// replicated jobs given by name and replicas, an InPlaceRestart one, a
// podFailurePolicy that fails the Job on exit codes, the reconciles' clock,
// and the API's restart-state fixtures, a JobSet for every state.
//
// Test code: only the tests of those packages import it. It imports the
// JobSet API alone, never a package of the controller, so that the tests
// of every one of them may use it (a package's own tests cannot import
// what imports that package).
package testutil
