// Package realnode runs inplace end to end on real kubelets and containerd:
// the local control plane, inplace-manager with its webhooks over TLS, and
// real nodes (test/cluster) that run the project's own images — the agent
// the webhook injects and the test worker. A person's way of making a worker
// fail, kubectl exec into it, is how the specs do it; the host is checked to
// be as it was once the nodes stop.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package realnode
