// Package deploy tests what config/ and charts/ install: the kustomize and
// Helm renderings agree, the manager's RBAC is enough, and the Dockerfile's
// stages copy every package their binary needs.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package deploy
