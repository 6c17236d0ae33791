package policies

import (
	"github.com/open-policy-agent/opa/v1/ast"
)

// EnforcementAction is what a policy's deny does.
type EnforcementAction string

const (
	// Deny rejects the JobSet.
	Deny EnforcementAction = "Deny"
	// Warn admits it with a warning.
	Warn EnforcementAction = "Warn"
	// DryRun admits it silently and only records the violation.
	DryRun EnforcementAction = "DryRun"
)

// builtinPackage is the package prefix of the built-in policies.
const builtinPackage = "inplace.builtin"

// OperationAudit is Input.Operation in the audit.
const OperationAudit = "AUDIT"

// Input is one admission request or audit item.
type Input struct {
	// Operation is CREATE or UPDATE, or AUDIT in the audit.
	Operation string
	Object    map[string]any
	OldObject map[string]any
	// Namespace and its labels, and the JobSet's labels, for matching.
	Namespace       string
	NamespaceLabels map[string]string
	Labels          map[string]string
	// Name of the JobSet, as the request names it.
	Name string
	// UserInfo is the requesting user; nil in the audit and offline.
	UserInfo *UserInfo
	// DryRun: the request is a dry run, nothing will be stored.
	DryRun bool
}

// UserInfo is the user of an admission request, as authentication.k8s.io
// has it.
type UserInfo struct {
	Username string              `json:"username,omitempty"`
	UID      string              `json:"uid,omitempty"`
	Groups   []string            `json:"groups,omitempty"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

// Violation is one message of one policy.
type Violation struct {
	Policy  string
	Message string
	// Inexact: the message is not the policy's own words (an evaluation
	// that failed, a message cut, the count of the messages left out), so
	// the same text need not mean the same violation.
	Inexact bool
	// Failed: the message says that the policy's evaluation failed.
	Failed bool
	// Builtin: a built-in policy's, which says what is invalid in the
	// JobSet itself (its message starts with the field), where an admin
	// policy's says what the cluster forbids.
	Builtin bool
}

func (v Violation) String() string { return v.Policy + ": " + v.Message }

// Decision is the outcome of evaluating every policy.
type Decision struct {
	// Denied rejects the request.
	Denied []Violation
	// Warned are returned to the client.
	Warned []Violation
	// DryRun are only recorded.
	DryRun []Violation
	// Patches are the operations of the patch rules, in policy order.
	Patches []Patch
	// Evaluated names the admin policies that matched and were evaluated,
	// in name order, whether or not they said anything.
	Evaluated []string
}

// Patch is one RFC 6902 operation, the policy it came from and that
// policy's enforcement action (Deny or Warn: a DryRun policy's patches are
// recorded as DryRun violations, never applied).
type Patch struct {
	Policy string
	Action EnforcementAction
	Op     map[string]any
}

// Policy is a compiled, prepared policy.
type Policy struct {
	// Name identifies the policy in messages, metrics and status.
	Name string
	// Action applies to deny messages.
	Action EnforcementAction
	// Match selects the JobSets the policy applies to; nil selects all.
	Match func(Input) bool
	// Parameters are passed as input.parameters.
	Parameters any
	// Target is what the policy is evaluated on.
	Target Target
	// UID and Generation name the JobSetPolicy and its generation
	// compiled (empty and 0 when unknown): replacing a policy by the same
	// generation of the same object keeps what the engine learned of its
	// evaluations. A policy deleted and created again under its name is a
	// new object, though its generation repeats.
	UID        string
	Generation int64

	query *preparedQuery
	// inventory is the data.inventory query reads, and prepareFor
	// prepares query again for another one.
	inventory  *Inventory
	prepareFor func(*Inventory) (*preparedQuery, error)
	// health of this version's evaluations (admin policies only).
	health *policyHealth
	// params are Parameters converted once, at Compile.
	params ast.Value
	// bindings name the query's variable of each decision rule.
	bindings map[string]string
	// builtin: one of the built-in policies.
	builtin bool
}

// CanRefuse says whether the policy has a rule that can refuse a JobSet
// (deny or violation); one without only warns or patches.
func (p *Policy) CanRefuse() bool {
	_, deny := p.bindings["deny"]
	_, violation := p.bindings["violation"]
	return deny || violation
}

// Target is what a policy is evaluated on.
type Target string

const (
	// TargetJobSet evaluates the policy on the JobSet.
	TargetJobSet Target = "JobSet"
	// TargetPodTemplates evaluates the policy once per replicated Job, on
	// its Pod template as a Pod.
	TargetPodTemplates Target = "PodTemplates"
)

// RegoVersion is the syntax of a policy's module.
type RegoVersion string

const (
	// RegoV1 is OPA 1.0's syntax, the default.
	RegoV1 RegoVersion = "v1"
	// RegoV0 is the syntax before OPA 1.0, that of Gatekeeper's library.
	RegoV0 RegoVersion = "v0"
)
