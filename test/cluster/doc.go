// Package cluster starts a real local Kubernetes control plane on 127.0.0.1:
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler, built from
// their Go modules by hack/build-cluster-binaries.sh, and with
// Options.RealNodes real nodes beside it: a kubelet and a containerd each
// (realnode.go; what they change on the host and how it is undone, host.go).
// Without real nodes, simulated ones (package test/simnode) play that part.
//
// Every component listens on free ports of 127.0.0.1 and writes its own log
// file. Stop removes every process and the working directory; logs are copied
// to an artifacts directory first when asked to keep them (a failed test).
// Children die with the parent process (Pdeathsig), and working directories
// left by a killed process are swept at the next start.
//
// Test code: it may import any package of the module, and no package outside
// test/ and perf/ (the benchmarks) may import it.
package cluster
