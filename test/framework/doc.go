// Package framework is the shared harness of the integration and end-to-end
// suites: it starts a control plane (envtest's apiserver alone, or the full
// local cluster of package test/cluster), installs the CRDs, hands out a
// client and a fresh namespace per spec, dumps that namespace when a spec
// fails, and tears everything down.
//
// A suite uses it as:
//
//	var fw = &framework.Framework{Name: "api"}
//	BeforeSuite(func() { cfg = fw.Init() ; ctx, k8sClient = fw.SetupClient(cfg) })
//	AfterSuite(func() { fw.Teardown() })
//
// Test code: it may import any package of the module, and no package outside
// test/ and perf/ (the benchmarks) may import it.
package framework
