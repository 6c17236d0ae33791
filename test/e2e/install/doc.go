// Package install installs inplace on a local cluster with a real node the
// way docs/how-to/install.md tells a platform team to: the README's kustomize
// command with kubectl, the variant for clusters without cert-manager, and
// the Helm chart. Each install then serves its webhooks from the manager's
// Deployment inside the cluster, and a JobSet a user creates goes through
// them and restarts in place on the real kubelet.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package install
