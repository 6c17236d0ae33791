// Package cluster starts a real local Kubernetes control plane on 127.0.0.1:
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler, built from
// their Go modules by hack/build-cluster-binaries.sh. There are no kubelets;
// simulated nodes play that part.
//
// Every component listens on free ports of 127.0.0.1 and writes its own log
// file. Stop removes every process and the working directory; logs are copied
// to an artifacts directory first when asked to keep them (a failed test).
// Children die with the parent process (Pdeathsig), and working directories
// left by a killed process are swept at the next start.
//
// Test code: it may import any package of the module, and no package outside
// test/ may import it.
package cluster
