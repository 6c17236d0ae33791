// Package controller tests the JobSet controller against a real
// kube-apiserver: lifecycle, failure and startup policies, the epoch
// protocol, a namespace being deleted and a manager restarted.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package controller
