// Package kubeflowtrainer installs Kubeflow Trainer, as
// hack/kubeflow-trainer pins it, in the local cluster: its controller
// manager built from its module, deployed with the module's own manifests
// (manifests/overlays/manager without the JobSet it bundles, as its
// kustomization says to when JobSet is installed).
//
// Test code: it may import any package of the module, and no package outside
// test/ and perf/ (the benchmarks) may import it.
package kubeflowtrainer
