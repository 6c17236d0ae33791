// Command admission benchmarks admission: the webhook handlers in process
// (mutate, validate, policy evaluation) on the specifications' manifests,
// and JobSet creation through a real kube-apiserver calling the webhooks
// over TLS, with concurrent clients (server-side dry-run). It prints a
// table and writes JSON.
//
// Benchmark code: it may import any package of the module, test/'s harness
// included, and no package outside perf/ may import it.
package main
