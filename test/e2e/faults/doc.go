// Package faults runs in-place restarts and admission through faults of
// the control plane on the local cluster: the API server and etcd killed
// and started again while a restart is under way and while JobSets are
// being admitted, with the real manager and its webhooks over TLS and
// simulated nodes running the real agent in every Pod.
//
// Test code: it imports the harness (test/framework) and any package of
// the module; nothing imports it.
package faults
