// Package suite runs policy suites: YAML files that say, case by case,
// what a JobSetPolicy must decide on a JobSet manifest (deny, warn or
// allow, and with which messages), as Gatekeeper's `gator verify` runs its
// suites. A case runs as admission would: the JobSet defaulted and injected
// by the mutating webhook's code, then the policy alone evaluated on it,
// with its parametersSchema applied and data.inventory filled from the
// suite's fixtures. `inplacectl policy test` and the policy library's test
// run suites through this package, offline.
//
// Imports: the policy engine, the JobSetPolicy compiler
// (policies/jobsetpolicy), the input builder (policies/review) and the
// webhook's admission pipeline. It never imports the JobSet
// controller, the agent or a binary's assembly, and it talks to no cluster.
package suite
