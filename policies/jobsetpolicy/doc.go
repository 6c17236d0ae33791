// Package jobsetpolicy turns a JobSetPolicy's spec into a policy of the
// engine: its match and exclude as a matcher, its parameters checked
// against and defaulted from its parametersSchema, its enforcement action.
// The policy reconciler, the JobSetPolicy webhook and the offline suite
// runner compile through it, so that each judges a spec alike.
//
// Imports: the policy API, the engine and the parameters' schema. It
// never imports controller-runtime or client-go: it is pure.
package jobsetpolicy
