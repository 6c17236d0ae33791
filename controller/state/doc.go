// Package state is what the JobSet controller knows of a JobSet's
// children: the index of every JobSet's Jobs and Pods that the event
// handlers feed, and the snapshot of one JobSet that a reconcile takes
// from it and hands to the decisions (controller/decide), with what the
// controller keeps of its own earlier reconciles (the expectations, the
// restarts held back):
//
//	childindex.go     every JobSet's family, fed by the Jobs' and Pods' event handlers
//	family.go         a JobSet's Jobs and Pods as compact records and running totals, its Pods by group
//	children.go       which Jobs belong to the current restart attempt, seen through the expectations
//	attempt.go        the attempt labels read as numbers, the Jobs' names (which Jobs are current is the JobSet API's)
//	pods.go           what the epoch protocol reads of one Pod, bounded and judged as of its JobSet
//	expectations.go   Jobs created or deleted whose creation or deletion the cache does not show yet
//	held.go           since when each JobSet's in-place restart, or its counters' write, has been held back, between its reconciles
//
// It records and classifies, and decides nothing: what to do with a
// JobSet is controller/decide's, talking to the API server controller's.
// The family and the Pod observation live together because each needs the
// other: the family records every Pod by what observePod reads of it, and
// which Jobs are current depends on the JobSet's restart attempt.
//
// Imports: the APIs (api/...) and podFailurePolicy matching
// (controller/podfailure); never client-go or controller-runtime, and no
// other package of the controller, so that the decisions and their tests
// build on it without a client.
package state
