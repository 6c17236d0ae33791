// Command local-cluster runs the local cluster of package test/cluster in the
// foreground until it receives SIGINT or SIGTERM: `make cluster-up` starts it
// in the background (through hack/cluster.sh) and `make cluster-down` stops
// it, the one way to run it by hand. It installs the objects of
// config/default as test/deploy's local install does (the PolicyReport
// CRDs included), runs inplace-manager as installed (controller and
// admission server, each as its service account, in this process) and
// -nodes simulated and -real-nodes real nodes,
// and writes an admin kubeconfig to -write-kubeconfig once the cluster is
// ready, and the real nodes' containerd addresses beside it
// (containerd-sockets), where images are imported into them.
// With INPLACE_CLUSTER_OWNER_PID set to a process id, it also stops, as on
// SIGTERM, once that process has exited: the owner a test names when it
// starts the cluster through `make cluster-up`.
// -check-real-nodes starts nothing and says whether real nodes can run
// here, and if not why: the demo runs on simulated nodes then.
//
// Test code: it may import any package of the module, and no package outside
// test/ may import it.
package main
