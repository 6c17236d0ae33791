// Package api tests the CRDs of config/crd on a real kube-apiserver: schema
// validation, defaults and CEL rules; and that `inplacectl status` reads a
// JobSet and what goes with it from the API server its flags name. That
// every example is admitted is test/e2e's examples_test.go, through the
// webhooks too.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package api
