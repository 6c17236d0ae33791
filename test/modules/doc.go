// Package modules reaches the add-ons the suites run beside inplace
// (upstream JobSet, Kueue, Kubeflow Trainer) as the hack/ wrapper modules
// pin them: their source in the module cache, and their own kustomize
// manifests rendered as a user's overlay would render them.
//
// Test code: it may import any package of the module, and no package outside
// test/ and perf/ (the benchmarks) may import it.
package modules
