// Package agent tests the agent against a real kube-apiserver: the
// inplace-agent binary and its transport, with the RBAC and admission policy
// of config/agent.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package agent
