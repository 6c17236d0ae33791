// Package api tests the CRDs of config/crd on a real kube-apiserver: schema
// validation, defaults and CEL rules, and that every example in examples/
// is accepted.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package api
