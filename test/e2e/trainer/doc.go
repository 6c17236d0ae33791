// Package trainer runs Kubeflow Trainer, built from its module
// (hack/kubeflow-trainer) and deployed with its own manifests, on
// inplace installed under upstream JobSet's names, on real kubelets: a
// TrainJob of examples/pytorch trains to completion, and with the policy
// library's trainer-restart-in-place every JobSet Trainer makes restarts
// in place without the TrainJob's author changing anything.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package trainer
