package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JobSetPolicy is a Rego policy that cluster admins apply to JobSets. Its
// module's deny rules reject (or warn about, or only record) a JobSet, its
// warn rules warn, and its patch rules mutate it. See docs/how-to/write-a-policy.md.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=jsp
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=".spec.enforcementAction"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Violations",type=integer,JSONPath=".status.audit.totalViolations"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type JobSetPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   JobSetPolicySpec   `json:"spec"`
	Status JobSetPolicyStatus `json:"status,omitempty"`
}

// JobSetPolicyList is a list of JobSetPolicies.
//
// +kubebuilder:object:root=true
type JobSetPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []JobSetPolicy `json:"items"`
}

// EnforcementAction is what the policy's deny rules do.
//
// +kubebuilder:validation:Enum=Deny;Warn;DryRun
type EnforcementAction string

const (
	// Deny rejects the JobSet with every message.
	Deny EnforcementAction = "Deny"
	// Warn admits it and returns the messages as warnings.
	Warn EnforcementAction = "Warn"
	// DryRun admits it and only records the messages (a metric and an Event).
	DryRun EnforcementAction = "DryRun"
)

// JobSetPolicySpec is the policy.
type JobSetPolicySpec struct {
	// rego is one Rego module. Its package is the policy's document; its
	// rules are `deny contains msg`, `warn contains msg`, `patch contains
	// op` and, as Gatekeeper's, `violation contains {"msg": msg}`. The
	// input is {operation, object, oldObject, parameters, review}, review
	// being the admission request as Gatekeeper gives it; data.inventory
	// holds the objects the manager syncs (see docs/how-to/write-a-policy.md).
	//
	// +kubebuilder:validation:MinLength=1
	Rego string `json:"rego"`

	// regoVersion is the Rego syntax of rego: v1 (the default), or v0,
	// the syntax of Gatekeeper's library (`deny[msg] { ... }`).
	//
	// +optional
	// +kubebuilder:default=v1
	RegoVersion RegoVersion `json:"regoVersion,omitempty"`

	// target is what the policy is evaluated on: JobSet (the default), the
	// JobSet itself; or PodTemplates, the Pod template of every replicated
	// Job, each as a Pod in input.review.object (its metadata and spec
	// after injection), so that a policy written for Pods applies to a
	// JobSet before any of its Pods exists. A PodTemplates policy has no
	// patch rules.
	//
	// +optional
	// +kubebuilder:default=JobSet
	Target Target `json:"target,omitempty"`

	// enforcementAction is what deny does: Deny, Warn or DryRun.
	//
	// +optional
	// +kubebuilder:default=Deny
	EnforcementAction EnforcementAction `json:"enforcementAction,omitempty"`

	// match selects the JobSets the policy applies to; empty selects all.
	//
	// +optional
	Match *Match `json:"match,omitempty"`

	// exclude exempts requests and JobSets that match would select.
	//
	// +optional
	Exclude *Exclude `json:"exclude,omitempty"`

	// parameters are passed to the policy as input.parameters. With a
	// parametersSchema, they must validate against it.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Parameters *apiextensionsv1.JSON `json:"parameters,omitempty"`

	// parametersSchema is an OpenAPI v3 schema, structural as a CRD's
	// (every field typed), of parameters: a policy whose parameters break
	// it is refused at create and update, with the field's path, rather
	// than stored to enforce nothing. Its root has type object.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	ParametersSchema *apiextensionsv1.JSON `json:"parametersSchema,omitempty"`
}

// RegoVersion is a Rego syntax.
//
// +kubebuilder:validation:Enum=v0;v1
type RegoVersion string

const (
	// RegoV0 is the syntax before OPA 1.0, Gatekeeper library's.
	RegoV0 RegoVersion = "v0"
	// RegoV1 is OPA 1.0's syntax (`deny contains msg if { ... }`).
	RegoV1 RegoVersion = "v1"
)

// Target is what a policy is evaluated on.
//
// +kubebuilder:validation:Enum=JobSet;PodTemplates
type Target string

const (
	// TargetJobSet evaluates the policy on the JobSet.
	TargetJobSet Target = "JobSet"
	// TargetPodTemplates evaluates it on each replicated Job's Pod
	// template, as a Pod.
	TargetPodTemplates Target = "PodTemplates"
)

// Operation is an admission operation on a JobSet.
//
// +kubebuilder:validation:Enum=CREATE;UPDATE
type Operation string

// Match selects the requests a policy applies to: by operation, by the
// requesting user, by the JobSet's namespace and labels; each field set
// must match. The audit, which has no request, applies the namespace and
// label selectors alone.
type Match struct {
	// operations the policy applies to at admission; empty means CREATE
	// and UPDATE.
	//
	// +optional
	// +listType=set
	Operations []Operation `json:"operations,omitempty"`
	// users are the names of the requesting users the policy applies to
	// (e.g. system:serviceaccount:ci:deployer); a trailing * matches any
	// suffix. With groups, a request matches if its user matches either.
	// Empty, with groups empty, means every user.
	//
	// +optional
	// +listType=set
	Users []string `json:"users,omitempty"`
	// groups of the requesting user the policy applies to.
	//
	// +optional
	// +listType=set
	Groups []string `json:"groups,omitempty"`
	// namespaceSelector selects the namespaces by their labels.
	//
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// labelSelector selects JobSets by their labels.
	//
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// Exclude exempts from a policy the requests of some users and groups
// and the JobSets of some namespaces. The manager's configuration
// (policies.exemptNamespaces) exempts namespaces from every policy.
type Exclude struct {
	// users whose requests the policy does not apply to, e.g. a CI
	// service account; a trailing * matches any suffix. The audit still
	// reports their JobSets: it does not know who created them.
	//
	// +optional
	// +listType=set
	Users []string `json:"users,omitempty"`
	// groups whose members' requests the policy does not apply to.
	//
	// +optional
	// +listType=set
	Groups []string `json:"groups,omitempty"`
	// namespaces whose JobSets the policy does not apply to; a trailing *
	// matches any suffix.
	//
	// +optional
	// +listType=set
	Namespaces []string `json:"namespaces,omitempty"`
}

// JobSetPolicyStatus is the state of the policy.
type JobSetPolicyStatus struct {
	// conditions: Ready is True once the current rego compiled and is in
	// force, False with the compile errors otherwise (the version in
	// inForce, if any, stays in force; the message says which).
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the conditions describe.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// errors are the compile errors of the current rego, each with its line.
	//
	// +optional
	// +listType=atomic
	Errors []string `json:"errors,omitempty"`

	// inForce is the last version of the spec that compiled: what every
	// replica of the manager enforces while the current spec does not
	// compile, including a replica that starts after the bad edit.
	//
	// +optional
	InForce *JobSetPolicySpec `json:"inForce,omitempty"`

	// inForceGeneration is the generation inForce was taken from.
	//
	// +optional
	InForceGeneration int64 `json:"inForceGeneration,omitempty"`

	// audit is the result of the last evaluation of existing JobSets.
	//
	// +optional
	Audit *AuditStatus `json:"audit,omitempty"`
}

// AuditStatus is one audit's outcome.
type AuditStatus struct {
	// lastRun is when the audit ran.
	LastRun metav1.Time `json:"lastRun"`
	// totalViolations counts every message of every JobSet.
	TotalViolations int32 `json:"totalViolations"`
	// violations lists the first ones (at most 20), by namespace, name and
	// message.
	//
	// +optional
	// +listType=atomic
	Violations []AuditViolation `json:"violations,omitempty"`
	// incomplete: the audit ran out of its time budget before it reached
	// every JobSet; the counts are of those it reached.
	//
	// +optional
	Incomplete bool `json:"incomplete,omitempty"`
}

// AuditViolation is one message about one JobSet.
type AuditViolation struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Message   string `json:"message"`
}

// Condition types and reasons of a JobSetPolicy.
const (
	ConditionReady     = "Ready"
	ReasonCompiled     = "Compiled"
	ReasonCompileError = "CompileError"
	// ReasonEvaluationFailing: the policy compiled, but its last
	// evaluations on a replica all failed (timed out, panicked or erred).
	// It stays in force: a Deny policy that cannot decide denies.
	ReasonEvaluationFailing = "EvaluationFailing"
)
