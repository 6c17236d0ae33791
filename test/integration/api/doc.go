// Package api tests the CRDs of config/crd on a real kube-apiserver: schema
// validation, defaults and CEL rules. That every example is admitted is
// test/e2e's examples_test.go, through the webhooks too.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package api
