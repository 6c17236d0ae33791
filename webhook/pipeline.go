package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/review"
	"github.com/inplace-dev/inplace/webhook/inject"
)

// Pipeline is admission's one path from a JobSet to a verdict, in the
// order the API server runs it: the review made into the policies' input
// (package policies/review); mutate, the mutating webhook's stage
// (defaults, injection, then the patch rules of the admin policies that
// match, until the JobSet stops changing); evaluate, the validating
// webhook's (the built-in policies and the admin policies that match).
// Each policy's match is the engine's, in both stages.
//
// The webhooks run its stages on each request; Admit runs them in order on
// a manifest for webhook/offline (`inplacectl render`), the policy suites
// and `inplacectl policy eval`; the audit evaluates input of the same
// review package. An offline verdict is the cluster's because it is made
// by the same code, in the same order.
type Pipeline struct {
	// Agent is what injection adds.
	Agent configv1alpha1.Agent
	// Engine holds the policies. Evaluate needs one; without one, Mutate
	// applies no patch rules.
	Engine *policies.Engine
	// SkipPatchRules leaves the admin policies' patch rules out of the
	// mutate stage: the policy suites and `inplacectl policy eval` judge
	// what a policy says of a JobSet as defaulted and injected, not of the
	// JobSet its own patch rules would make.
	SkipPatchRules bool
}

// Mutated is the mutate stage's answer.
type Mutated struct {
	// JSON is the JobSet as mutated.
	JSON []byte
	// Injected says what injection changed and why.
	Injected []inject.Decision
	// Warnings are for the client: the Warn policies whose patch rules
	// failed and were not applied.
	Warnings []string
}

// patchEngine is the engine whose patch rules the mutate stage applies,
// or nil.
func (p Pipeline) patchEngine() *policies.Engine {
	if p.SkipPatchRules || p.Engine == nil || !p.Engine.HasAdminPolicies() {
		return nil
	}
	return p.Engine
}

// Mutate is the mutate stage on a created JobSet: defaults, injection and
// the patch rules, applied until the object stops changing. in is the
// request's input; each pass judges the JobSet as it stands then.
func (p Pipeline) Mutate(ctx context.Context, js *jobset.JobSet, in policies.Input) (Mutated, error) {
	var m Mutated
	raw, warnings, err := untilStable(ctx, js, p.patchEngine(), in, func(js *jobset.JobSet) {
		jobset.Default(js)
		m.Injected = append(m.Injected, inject.Inject(js, p.Agent)...)
	})
	if err != nil {
		return Mutated{}, err
	}
	m.JSON, m.Warnings = raw, warnings
	return m, nil
}

// Evaluate is the evaluate stage: every built-in policy, and every admin
// policy that matches in.
func (p Pipeline) Evaluate(ctx context.Context, in policies.Input) (policies.Decision, error) {
	return p.Engine.Evaluate(ctx, in)
}

// Verdict is what Admit answers.
type Verdict struct {
	// Mutated is the mutate stage's answer.
	Mutated Mutated
	// Object is the JobSet evaluated, as stored; nil when the JobSet was
	// refused before the evaluate stage.
	Object map[string]any
	// Policies is the evaluate stage's decision.
	Policies policies.Decision
	// Refusal is the text of the API server's error when it refuses the
	// JobSet; empty when it admits it.
	Refusal string
}

// Refused is the error of a step between the webhooks that refuses the
// JobSet, with the API server's text.
type Refused struct{ Message string }

func (r *Refused) Error() string { return r.Message }

// Store is what the API server does with the mutating webhook's answer
// before the validating webhook sees it; it returns the object stored, or
// a *Refused.
type Store func(ctx context.Context, mutated []byte) (map[string]any, error)

// Admit runs the stages in order on js, a JobSet created without a
// cluster (an update's case is judged as a create: defaults and
// injection, not the webhook's restoration of the stored object): mutate,
// then store (nil keeps the mutated JSON as it
// is), then evaluate the stored object. in is the input of the review
// (package policies/review). An error says the pipeline could not judge
// the JobSet; a refusal is in the Verdict, with the API server's text.
func (p Pipeline) Admit(ctx context.Context, js *jobset.JobSet, in policies.Input, store Store) (Verdict, error) {
	var v Verdict
	m, err := p.Mutate(ctx, js, in)
	if err != nil {
		v.Refusal = Refusal(MutatingWebhookName, err.Error())
		return v, nil
	}
	v.Mutated = m
	if store == nil {
		store = func(_ context.Context, raw []byte) (map[string]any, error) { return toMap(raw) }
	}
	obj, err := store(ctx, m.JSON)
	var refused *Refused
	if errors.As(err, &refused) {
		v.Refusal = refused.Message
		return v, nil
	}
	if err != nil {
		return v, err
	}
	v.Object = obj
	if v.Policies, err = p.Evaluate(ctx, review.WithObject(in, obj)); err != nil {
		return v, err
	}
	if len(v.Policies.Denied) > 0 {
		v.Refusal = Refusal(ValidatingWebhookName, DenialMessage(in.Name, v.Policies.Denied))
	}
	return v, nil
}

// untilStable prepares js (defaults and injection on a create, the
// restoration of what an update left out), then applies the patch rules of
// the engine's admin policies, again until the object stops changing.
func untilStable(ctx context.Context, js *jobset.JobSet, engine *policies.Engine, in policies.Input, prepare func(*jobset.JobSet)) ([]byte, []string, error) {
	var warnings []string
	for pass := 0; pass < maxMutationPasses; pass++ {
		prepare(js)
		raw, err := json.Marshal(js)
		if err != nil {
			return nil, nil, err
		}
		// Preparing is idempotent (a tested property): only policy patches
		// can call for another pass.
		if engine == nil || !engine.HasAdminPolicies() {
			return raw, warnings, nil
		}
		patched, passWarnings, err := applyPolicyPatches(ctx, engine, in, raw)
		if err != nil {
			return nil, nil, err
		}
		// A Warn policy that fails fails again in the next pass.
		for _, w := range passWarnings {
			if !slices.Contains(warnings, w) {
				warnings = append(warnings, w)
			}
		}
		next, err := decode(patched)
		if err != nil {
			return nil, nil, fmt.Errorf("a policy patch produced an invalid JobSet: %w", err)
		}
		if equality.Semantic.DeepEqual(js, next) {
			return patched, warnings, nil
		}
		js = next
	}
	return nil, nil, fmt.Errorf("mutation does not converge: the patch rules of the policies keep changing the JobSet after %d passes; fix the policies so that a patched JobSet needs no further patch", maxMutationPasses)
}
