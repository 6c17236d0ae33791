package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/jobsetpolicy"
	"github.com/inplace-dev/inplace/policies/review"
	"github.com/inplace-dev/inplace/webhook"
)

// Result is what a suite's policy decided on each case.
type Result struct {
	// Suite is the suite file, Policy the policy's name.
	Suite, Policy string
	Cases         []CaseResult
}

// CaseResult is one case's outcome.
type CaseResult struct {
	Name   string
	Passed bool
	// Got is the outcome: deny, warn or allow; empty when the case could
	// not be evaluated (its parameters broke the schema, the policy
	// failed).
	Got Expect
	// Messages are every message of the policy, as the engine gives them.
	Messages []string
	// Why says what was decided and, for a failed case, what was wanted.
	Why string
}

// Failed counts the failed cases.
func (r *Result) Failed() int {
	n := 0
	for _, c := range r.Cases {
		if !c.Passed {
			n++
		}
	}
	return n
}

// Run loads the suite at path (a suite file, or a directory holding
// suite.yaml) and runs it.
func Run(ctx context.Context, path string) (*Result, error) {
	s, err := Load(path)
	if err != nil {
		return nil, err
	}
	return s.Run(ctx)
}

// request is a case read from its files.
type request struct {
	c       *Case
	js, old *jobset.JobSet
}

// Run runs every case. An error says the suite could not run: a file that
// does not parse, a policy that does not compile or whose parameters
// break its schema. A case whose outcome or messages differ from its
// expectations is a failed CaseResult.
func (s *Suite) Run(ctx context.Context) (*Result, error) {
	policy, err := ReadPolicy(s.resolve(s.Policy))
	if err != nil {
		return nil, fmt.Errorf("%s: policy: %w", s.path, err)
	}
	res := &Result{Suite: s.path, Policy: policy.Name}
	builtins, err := policies.BuiltinNames()
	if err != nil {
		return nil, err
	}
	// Every built-in disabled: only the policy under test decides.
	engine, err := policies.NewEngine(builtins)
	if err != nil {
		return nil, err
	}
	var objs []policies.InventoryObject
	for i, f := range s.Inventory {
		o, err := readObjects(s.resolve(f))
		if err != nil {
			return nil, fmt.Errorf("%s: inventory[%d]: %w", s.path, i, err)
		}
		objs = append(objs, o...)
	}
	nsLabels, err := fill(ctx, engine.Inventory(), objs)
	if err != nil {
		return nil, fmt.Errorf("%s: inventory: %w", s.path, err)
	}
	namespaceLabels := func(ns string) labels.Set { return nsLabels[ns] }
	// The policy as written first, through the JobSetPolicy webhook's own
	// check: a policy the cluster refuses (parameters that break its
	// schema among its reasons) fails the suite, with the cluster's words.
	if _, err := jobsetpolicy.Admit(policy.Name, &policy.Spec, namespaceLabels, engine); err != nil {
		return nil, fmt.Errorf("%s: policy %s: %w", s.path, policy.Name, err)
	}
	reqs := make([]request, len(s.Cases))
	for i := range s.Cases {
		c := &s.Cases[i]
		r := request{c: c}
		if r.js, err = readJobSet(s.resolve(c.Object)); err != nil {
			return nil, fmt.Errorf("%s: cases[%d].object: %w", s.path, i, err)
		}
		if c.OldObject != "" {
			if r.old, err = readJobSet(s.resolve(c.OldObject)); err != nil {
				return nil, fmt.Errorf("%s: cases[%d].oldObject: %w", s.path, i, err)
			}
		}
		reqs[i] = r
	}
	cfg, err := configv1alpha1.Load("")
	if err != nil {
		return nil, err
	}
	for _, r := range reqs {
		res.Cases = append(res.Cases, runCase(ctx, engine, cfg.Agent, policy, namespaceLabels, r))
	}
	return res, nil
}

func runCase(ctx context.Context, engine *policies.Engine, agent configv1alpha1.Agent, policy *policyv1alpha1.JobSetPolicy, nsLabels func(string) labels.Set, r request) CaseResult {
	c := r.c
	out := CaseResult{Name: c.Name}
	fail := func(format string, args ...any) CaseResult {
		out.Why = fmt.Sprintf(format, args...)
		return out
	}
	spec := policy.Spec.DeepCopy()
	if c.Parameters != nil {
		raw, err := json.Marshal(c.Parameters)
		if err != nil {
			return fail("parameters: %v", err)
		}
		spec.Parameters = &apiextensionsv1.JSON{Raw: raw}
	}
	p, err := jobsetpolicy.Compile(policy.Name, spec, nsLabels, engine)
	if err != nil {
		return fail("parameters: %v", err)
	}
	engine.SetPolicy(p)

	namespace := c.Namespace
	if namespace == "" {
		namespace = r.js.Namespace
	}
	if namespace == "" {
		namespace = "default"
	}
	// The policy alone decides, on the JobSet as defaulted and injected:
	// its patch rules are not applied first.
	pipeline := webhook.Pipeline{Agent: agent, Engine: engine, SkipPatchRules: true}
	js, object, err := inNamespace(r.js, namespace)
	if err != nil {
		return fail("object: %v", err)
	}
	var old map[string]any
	if r.old != nil {
		if old, err = stored(ctx, pipeline, r.old, namespace); err != nil {
			return fail("oldObject: %v", err)
		}
	}
	user := c.UserInfo
	if user == nil {
		user = &policies.UserInfo{}
	}
	v, err := pipeline.Admit(ctx, js, review.Offline(c.Operation, namespace, object, old, user), nil)
	if err != nil {
		return fail("the policy's evaluation failed: %v", err)
	}
	if v.Object == nil {
		return fail("object: %s", v.Refusal)
	}
	d := v.Policies
	for _, vs := range [][]policies.Violation{d.Denied, d.Warned, d.DryRun} {
		for _, v := range vs {
			if v.Failed {
				return fail("the policy's evaluation failed: %s", v.Message)
			}
			out.Messages = append(out.Messages, v.Message)
		}
	}
	switch {
	case len(d.Denied) > 0:
		out.Got = ExpectDeny
	case len(d.Warned) > 0:
		out.Got = ExpectWarn
	default:
		out.Got = ExpectAllow
	}
	said := string(out.Got)
	switch {
	case len(d.Evaluated) == 0:
		said += " (the policy's match or exclude leaves the request out)"
	case len(out.Messages) > 0:
		said += ": " + quoted(out.Messages)
	}
	if out.Got != c.Expect {
		return fail("got %s, want %s", said, c.Expect)
	}
	for _, want := range c.Messages {
		if !containsSubstring(out.Messages, want) {
			return fail("no message contains %q; got %s", want, said)
		}
	}
	out.Passed = true
	out.Why = said
	return out
}

// inNamespace is a copy of js in namespace, typed and as JSON values.
func inNamespace(js *jobset.JobSet, namespace string) (*jobset.JobSet, map[string]any, error) {
	js = js.DeepCopy()
	js.Namespace = namespace
	raw, err := json.Marshal(js)
	if err != nil {
		return nil, nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, nil, err
	}
	return js, obj, nil
}

// stored is the JobSet as the mutate stage stores it in namespace: the
// stored JobSet of an update was defaulted and injected when it was
// created.
func stored(ctx context.Context, pipeline webhook.Pipeline, js *jobset.JobSet, namespace string) (map[string]any, error) {
	js, obj, err := inNamespace(js, namespace)
	if err != nil {
		return nil, err
	}
	m, err := pipeline.Mutate(ctx, js, review.Offline("CREATE", namespace, obj, nil, nil))
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(m.JSON, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func containsSubstring(msgs []string, s string) bool {
	for _, m := range msgs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

func quoted(msgs []string) string {
	q := make([]string, len(msgs))
	for i, m := range msgs {
		q[i] = fmt.Sprintf("%q", m)
	}
	return strings.Join(q, ", ")
}
