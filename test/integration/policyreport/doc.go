// Package policyreport tests the policy audit's PolicyReports on a real
// kube-apiserver (envtest): the CRD of config/policyreport installed as a
// user does, one audit run at a time against JobSets in two namespaces,
// the reports' results, summary, timestamps and deletion, and an audit
// without the CRD.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package policyreport
