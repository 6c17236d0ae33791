// Package kubeflowtrainer pins Kubeflow Trainer
// (github.com/kubeflow/trainer/v2) at the release the project is tested
// with, so that hack/build-cluster-binaries.sh builds its controller
// manager from the module itself: test/e2e/trainer deploys it with the
// module's own manifests and runs TrainJobs on inplace's JobSet
// controller.
package kubeflowtrainer
