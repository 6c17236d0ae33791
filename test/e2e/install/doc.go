// Package install installs inplace on a local cluster with a real node the
// way docs/how-to/install.md tells a platform team to: the README's kustomize
// command with kubectl, the variant for clusters without cert-manager, and
// the Helm chart. Each install then serves its webhooks from the manager's
// Deployment inside the cluster, and a JobSet a user creates goes through
// them and restarts in place on the real kubelet.
//
// From a release: make release's archives pushed to the cluster's registry
// and installed with kubectl and with Helm, the plugin with krew, the
// images imported into a node's containerd (docs/how-to/release.md); the
// previous release upgraded to the tree's and rolled back while JobSets
// run (docs/how-to/upgrade.md); and every command of docs/how-to/operate.md
// run against a release's install.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package install
