// Package upstream runs upstream JobSet's own end-to-end suite
// (sigs.k8s.io/jobset/test/e2e at the version hack/upstream-jobset pins,
// built from its module by 'make cluster-binaries') against inplace
// installed under upstream's names (config/jobset-names), on real kubelets:
// the cluster gives it what a kind cluster gives (DNS, a default
// StorageClass, docker.io/library/bash:latest from the cluster's
// registry). Every spec of it must pass; none is skipped.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package upstream
