// Command local-cluster runs the local cluster of package test/cluster in the
// foreground until it receives SIGINT or SIGTERM: `make cluster-up` starts it
// in the background and `make cluster-down` stops it. It installs the CRDs of
// config/crd and writes an admin kubeconfig to -kubeconfig once the cluster
// is ready, and the real nodes' containerd addresses beside it
// (containerd-sockets), where images are imported into them.
//
// Test code: it may import any package of the module, and no package outside
// test/ may import it.
package main
