package jobsetpolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
	policyparams "github.com/inplace-dev/inplace/policies/params"
)

// Action is the policy's enforcementAction, Deny when unset.
func Action(spec *policyv1alpha1.JobSetPolicySpec) policies.EnforcementAction {
	if spec.EnforcementAction == "" {
		return policies.Deny
	}
	return policies.EnforcementAction(spec.EnforcementAction)
}

// Compile turns a JobSetPolicy's spec (its current one, or the one in
// force) into an engine policy named name: its parameters checked against
// its parametersSchema, defaulted from it, and passed to the policy. A
// policy compiled with an engine reads the engine's inventory; without
// one (the JobSetPolicy webhook), an empty one. nsLabels resolves
// namespace labels when the input does not carry them.
func Compile(name string, spec *policyv1alpha1.JobSetPolicySpec, nsLabels func(string) labels.Set, engine *policies.Engine) (*policies.Policy, error) {
	match, err := matcher(spec.Match, spec.Exclude, nsLabels)
	if err != nil {
		return nil, err
	}
	params, err := parameters(spec)
	if err != nil {
		return nil, err
	}
	src := policies.Source{
		Name: name, Rego: spec.Rego, RegoVersion: policies.RegoVersion(spec.RegoVersion),
		Action: Action(spec), Target: policies.Target(spec.Target), Match: match,
	}
	if params != nil {
		src.Parameters = params
	}
	if engine != nil {
		return engine.Compile(src)
	}
	return policies.Compile(src)
}

// parameters returns spec.parameters, checked against and defaulted from
// spec.parametersSchema if there is one.
func parameters(spec *policyv1alpha1.JobSetPolicySpec) (map[string]any, error) {
	var params map[string]any
	if spec.Parameters != nil && len(spec.Parameters.Raw) > 0 {
		if err := json.Unmarshal(spec.Parameters.Raw, &params); err != nil {
			return nil, fmt.Errorf("spec.parameters: %w", err)
		}
	}
	if spec.ParametersSchema == nil || len(spec.ParametersSchema.Raw) == 0 {
		return params, nil
	}
	schema, err := policyparams.Compile(spec.ParametersSchema.Raw)
	if err != nil {
		return nil, err
	}
	if params == nil {
		params = map[string]any{}
	}
	if errs := schema.Validate(params); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return nil, fmt.Errorf("spec.parameters do not match spec.parametersSchema: %s", strings.Join(msgs, "; "))
	}
	return params, nil
}

func matcher(m *policyv1alpha1.Match, ex *policyv1alpha1.Exclude, nsLabels func(string) labels.Set) (func(policies.Input) bool, error) {
	if m == nil {
		m = &policyv1alpha1.Match{}
	}
	if ex == nil {
		ex = &policyv1alpha1.Exclude{}
	}
	nsSel, lblSel := labels.Everything(), labels.Everything()
	var err error
	if m.NamespaceSelector != nil {
		if nsSel, err = metav1.LabelSelectorAsSelector(m.NamespaceSelector); err != nil {
			return nil, fmt.Errorf("spec.match.namespaceSelector: %w", err)
		}
	}
	if m.LabelSelector != nil {
		if lblSel, err = metav1.LabelSelectorAsSelector(m.LabelSelector); err != nil {
			return nil, fmt.Errorf("spec.match.labelSelector: %w", err)
		}
	}
	if nsSel.Empty() && lblSel.Empty() && len(m.Operations) == 0 && len(m.Users) == 0 && len(m.Groups) == 0 &&
		len(ex.Users) == 0 && len(ex.Groups) == 0 && len(ex.Namespaces) == 0 {
		return nil, nil
	}
	return func(in policies.Input) bool {
		if policies.MatchesAny(ex.Namespaces, in.Namespace) {
			return false
		}
		if in.Operation == policies.OperationAudit {
			// The audit has no request. A policy for some users only is
			// left out of it, as Kyverno leaves it out of its background
			// scan: who created a JobSet is not known, and reporting
			// every JobSet would report those the policy never meant.
			// Excluded users and operations say nothing of a JobSet's
			// state: the audit reports on every JobSet the selectors pick.
			if len(m.Users) > 0 || len(m.Groups) > 0 {
				return false
			}
		} else {
			if len(m.Operations) > 0 && !slices.Contains(m.Operations, policyv1alpha1.Operation(in.Operation)) {
				return false
			}
			u := in.UserInfo
			if u == nil {
				u = &policies.UserInfo{}
			}
			if (len(m.Users) > 0 || len(m.Groups) > 0) && !userMatches(m.Users, m.Groups, u) {
				return false
			}
			if userMatches(ex.Users, ex.Groups, u) {
				return false
			}
		}
		nsl := labels.Set(in.NamespaceLabels)
		if in.NamespaceLabels == nil && nsLabels != nil && !nsSel.Empty() {
			nsl = nsLabels(in.Namespace)
		}
		return nsSel.Matches(nsl) && lblSel.Matches(labels.Set(in.Labels))
	}, nil
}

// userMatches reports whether the user is one of users or in one of
// groups.
func userMatches(users, groups []string, u *policies.UserInfo) bool {
	if policies.MatchesAny(users, u.Username) {
		return true
	}
	for _, g := range u.Groups {
		if slices.Contains(groups, g) {
			return true
		}
	}
	return false
}

// Admit is the check a JobSetPolicy passes to be admitted: compiled as
// Compile compiles it (its Rego in the sandbox, its match, its parameters
// against its parametersSchema), or refused with the field at fault, in
// the words the JobSetPolicy webhook refuses it with. The webhook and the
// policy suites (`inplacectl policy test`) both call it, so that a suite
// runs only a policy the cluster would admit.
func Admit(name string, spec *policyv1alpha1.JobSetPolicySpec, nsLabels func(string) labels.Set, engine *policies.Engine) (*policies.Policy, error) {
	p, err := Compile(name, spec, nsLabels, engine)
	if err != nil {
		msg := strings.TrimSpace(err.Error())
		if !strings.HasPrefix(msg, "spec.") {
			// The compiler's errors name the file and line, not the field.
			msg = "spec.rego: " + msg
		}
		return nil, errors.New("the policy would not be in force: " + msg)
	}
	return p, nil
}
