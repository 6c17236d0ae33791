package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JobSetPolicy is a Rego policy that cluster admins apply to JobSets. Its
// module's deny rules reject (or warn about, or only record) a JobSet, its
// warn rules warn, and its patch rules mutate it. See docs/policies.md.
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
	// rego is one Rego (v1) module. Its package is the policy's document;
	// its rules are `deny contains msg`, `warn contains msg` and
	// `patch contains op`. The input is {operation, object, oldObject,
	// parameters}.
	//
	// +kubebuilder:validation:MinLength=1
	Rego string `json:"rego"`

	// enforcementAction is what deny does: Deny, Warn or DryRun.
	//
	// +optional
	// +kubebuilder:default=Deny
	EnforcementAction EnforcementAction `json:"enforcementAction,omitempty"`

	// match selects the JobSets the policy applies to; empty selects all.
	//
	// +optional
	Match *Match `json:"match,omitempty"`

	// parameters are passed to the policy as input.parameters.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Parameters *apiextensionsv1.JSON `json:"parameters,omitempty"`
}

// Match selects JobSets by namespace and labels; both must match.
type Match struct {
	// namespaceSelector selects the namespaces by their labels.
	//
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// labelSelector selects JobSets by their labels.
	//
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
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
