// Package kueue runs Kueue, built from its module (hack/kueue) and
// deployed with its own manifests, in front of inplace installed under
// upstream JobSet's names, on real kubelets: Kueue's own JobSet
// end-to-end specs, built from its module, and what a shared cluster does
// to InPlaceRestart JobSets (preemption and resumption, waitForPodsReady,
// topology-aware scheduling).
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package kueue
