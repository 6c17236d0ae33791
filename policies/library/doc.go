// Package library is the policy library: ready-made JobSetPolicies, one
// directory each, with policy.yaml (the manifest to kubectl apply),
// suite.yaml and the cases and inventory fixtures it runs on. See
// docs/reference/policy-library.md.
//
// Its only Go is its test, which runs every suite through
// webhook/offline/suite, so that `make test` checks every policy of the
// library. The package itself imports nothing of the product.
package library
