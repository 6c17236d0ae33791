// Package policies evaluates Rego policies against JobSets at admission and
// in the audit. It embeds OPA (Rego v1): every policy is compiled strictly
// and prepared once, without network builtins, and swapped in atomically so
// that a request always sees one consistent set.
//
// The contract of a policy module, built-in or admin:
//
//	deny contains msg    a reason to reject the JobSet
//	warn contains msg    a warning returned to the client
//	patch contains op    an RFC 6902 operation applied by the mutating webhook
//
// Its input is
//
//	{"operation": "CREATE"|"UPDATE", "object": <JobSet>, "oldObject": <JobSet>,
//	 "parameters": <the JobSetPolicy's parameters>}
//
// Built-in policies (package builtin) run in every request and can be turned
// off by name. Admin policies come from JobSetPolicy objects; their
// enforcementAction decides whether deny means Deny, Warn or DryRun.
//
// Files by concern: types.go (the API of a decision: Input, Decision,
// Policy), compile.go (a module to a prepared query), engine.go (the
// built-ins and the admin policies in force), evaluate.go (a request's
// evaluation, bounded), sandbox.go and bounds*.go (what a policy may call),
// inventory.go (data.inventory).
//
// Imports: OPA and the Prometheus client. It never imports controller-runtime,
// client-go, the controller, the webhook or the agent: inplacectl runs it
// offline, and the webhook and the reconciler (package reconciler) wrap it,
// compiling JobSetPolicies through package jobsetpolicy.
package policies
