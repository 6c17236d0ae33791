// Package review turns what a policy is asked to judge into the engine's
// input, once and alike for every origin: an admission request (the
// webhooks), a stored JobSet (the audit), a manifest (`inplacectl render`,
// `policy eval`, the policy suites). As Gatekeeper's target handles a
// review for its webhook, its audit and gator, so that a policy sees the
// same input whoever asks, and an offline verdict is the cluster's. One
// difference is the origin's own: offline, no namespace is read, and
// input.namespaceLabels is empty.
//
// Imports: the policy engine's types and the admission API types. It
// never imports controller-runtime, client-go or anything of ours but the
// engine: it is pure.
package review
