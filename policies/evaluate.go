package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// Evaluate runs every built-in and matching admin policy on in. The input
// is converted once and shared by every policy.
func (e *Engine) Evaluate(ctx context.Context, in Input) (Decision, error) {
	return e.evaluate(ctx, in, evalOptions{builtins: true, judgeHealth: true})
}

// EvaluateAdmin runs only the matching admin policies that have patch
// rules, for those rules.
func (e *Engine) EvaluateAdmin(ctx context.Context, in Input) (Decision, error) {
	return e.evaluate(ctx, in, evalOptions{judgeHealth: true, patchesOnly: true})
}

// Audit runs the matching admin policies for the audit. Its evaluations
// say nothing of a policy's health: the audit's own time budget cuts
// them short, through no fault of the policy.
func (e *Engine) Audit(ctx context.Context, in Input) (Decision, error) {
	return e.evaluate(ctx, in, evalOptions{})
}

// evalOptions say what one evaluation runs, and what it counts.
type evalOptions struct {
	// builtins runs the built-in policies too.
	builtins bool
	// judgeHealth counts each admin policy's outcome toward its health
	// (its Ready condition); the audit's own time budget cuts evaluations
	// short through no fault of theirs.
	judgeHealth bool
	// patchesOnly runs only the admin policies with patch rules.
	patchesOnly bool
}

func (e *Engine) evaluate(ctx context.Context, in Input, opts evalOptions) (Decision, error) {
	var d Decision
	base, err := baseInput(in)
	if err != nil {
		return d, err
	}
	// Every policy of this request shares one deadline; each has its own
	// within it (Policy.eval). A policy reached after the total deadline
	// fails at once, as one that timed out.
	ctx, cancel := context.WithTimeout(ctx, e.limits.TotalTimeout)
	defer cancel()
	var errs []error
	if opts.builtins {
		// The built-ins are the project's own Rego, linear in a JobSet
		// its schema bounds (docs/explanation/security.md): they run
		// here, and a request no admin policy matches costs no
		// evaluator process.
		errs = e.evalBuiltins(ctx, base, &d)
	}
	if e.exempted(in.Namespace) {
		return d, errors.Join(errs...)
	}
	// What to evaluate, first: an evaluator process is sent all of it at
	// once.
	type policyInputs struct {
		p      *Policy
		inputs []podInput
	}
	var todo []policyInputs
	var calls []plannedCall
	var pods []podInput // made once, for the first PodTemplates policy (nil: not yet)
	for _, p := range *e.admin.Load() {
		if p.Match != nil && !p.Match(in) {
			continue
		}
		if _, patches := p.bindings["patch"]; opts.patchesOnly && !patches {
			continue
		}
		d.Evaluated = append(d.Evaluated, p.Name)
		inputs := []podInput{{input: base}}
		if p.Target == TargetPodTemplates {
			if pods == nil {
				pods = podInputs(in, base)
			}
			inputs = pods
		}
		todo = append(todo, policyInputs{p, inputs})
		for _, in := range inputs {
			calls = append(calls, plannedCall{policy: p.Name, query: p.query, input: in.input, timeout: e.limits.PolicyTimeout})
		}
	}
	if len(todo) == 0 {
		return d, errors.Join(errs...)
	}
	ev := e.begin()
	defer ev.done()
	ev.plan(calls)
	for _, t := range todo {
		p := t.p
		var perInput []error
		for _, in := range t.inputs {
			perInput = append(perInput, p.eval(ctx, ev, in.input, in.prefix, &d, e.limits.PolicyTimeout, e.metrics))
		}
		err := errors.Join(perInput...)
		if opts.judgeHealth && judged(ctx, perInput) && p.health.observe(ownFailure(perInput)) && e.onHealthChange != nil {
			e.onHealthChange(p.Name)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return d, errors.Join(errs...)
}

// judged reports whether a policy's evaluations on a request say
// anything of its health: a policy reached after the request's deadline,
// cut short by its caller, or that no evaluator process could take in,
// failed through no fault of its own.
func judged(ctx context.Context, errs []error) bool {
	if ownFailure(errs) != nil {
		return ctx.Err() == nil
	}
	for _, err := range errs {
		if err != nil {
			return false // not the policy's
		}
	}
	return true
}

// ownFailure is the first of errs that is the policy's own.
func ownFailure(errs []error) error {
	for _, err := range errs {
		if err != nil && !errors.Is(err, errEvaluatorUnavailable) {
			return err
		}
	}
	return nil
}

// evalBuiltins evaluates the built-ins in one query and sorts each one's
// messages under its name; if that query fails, it evaluates each on its
// own.
func (e *Engine) evalBuiltins(ctx context.Context, base *ast.Term, d *Decision) []error {
	var ev inProcess
	if len(e.builtins) == 0 {
		return nil
	}
	start := time.Now()
	// The built-ins are the project's own code: only the request's limit,
	// already on ctx, bounds them.
	rs, err := ev.eval(ctx, e.allBuiltins, base, nil, 0)
	e.metrics.observeEvaluation("builtin", time.Since(start))
	if err == nil {
		for _, p := range e.builtins {
			p.collect(rs, "", d, e.metrics)
		}
		return nil
	}
	var errs []error
	for _, p := range e.builtins {
		if err := p.eval(ctx, ev, base, "", d, 0, e.metrics); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// evalBounded evaluates a prepared query within timeout (0: within ctx's
// deadline alone, the request's), and turns a panic
// inside OPA or a builtin into an error: one policy must not take the
// manager, and the restarts it runs, down with it.
func evalBounded(ctx context.Context, q rego.PreparedEvalQuery, input ast.Value, timeout time.Duration) (rs rego.ResultSet, err error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			rs, err = nil, fmt.Errorf("%w: %v", errPanicked, r)
		}
	}()
	rs, err = q.Eval(ctx, rego.EvalParsedInput(input))
	if err != nil && ctx.Err() != nil {
		// OPA reports a cancelled evaluation in its own words; say which
		// limit it hit, and keep the context's error for errors.Is.
		if timeout == 0 {
			return nil, fmt.Errorf("evaluation exceeded the request's time limit: %w", ctx.Err())
		}
		return nil, fmt.Errorf("evaluation exceeded its time limit of %v, or the request's: %w", timeout, ctx.Err())
	}
	return rs, err
}

// evaluation runs the queries of one request: in this process, or in an
// evaluator process (evaluator.go).
type evaluation interface {
	// plan says which evaluations are to come, in order: an evaluator
	// process is sent them at once, and answers each as it is done.
	plan(calls []plannedCall)
	// eval evaluates q on input, with input.parameters set to params
	// unless nil, within timeout (0: within ctx's deadline alone).
	eval(ctx context.Context, q *preparedQuery, input *ast.Term, params ast.Value, timeout time.Duration) (rego.ResultSet, error)
	// done gives back what the evaluation held.
	done()
}

// inProcess evaluates in the caller's goroutine.
type inProcess struct{}

func (inProcess) eval(ctx context.Context, q *preparedQuery, input *ast.Term, params ast.Value, timeout time.Duration) (rego.ResultSet, error) {
	return evalBounded(ctx, q.PreparedEvalQuery, withParameters(input.Value, params), timeout)
}

func (inProcess) plan([]plannedCall) {}

func (inProcess) done() {}

// plannedCall is one evaluation to come, of policy.
type plannedCall struct {
	policy  string
	query   *preparedQuery
	input   *ast.Term
	timeout time.Duration
}

// begin starts one request's evaluation: in the engine's evaluator
// processes if it has any (Engine.Isolate), else in this process.
func (e *Engine) begin() evaluation {
	if pool := e.processes.Load(); pool != nil {
		return pool.session()
	}
	return inProcess{}
}

func baseInput(in Input) (*ast.Term, error) {
	var object, old *ast.Term
	if in.Object != nil {
		v, err := ast.InterfaceToValue(in.Object)
		if err != nil {
			return nil, fmt.Errorf("converting object: %w", err)
		}
		object = ast.NewTerm(v)
	}
	if in.OldObject != nil {
		old = object
		// The ratchet evaluates the stored JobSet as both: converted once.
		// Evaluation never writes its input.
		if old == nil || reflect.ValueOf(in.OldObject).UnsafePointer() != reflect.ValueOf(in.Object).UnsafePointer() {
			v, err := ast.InterfaceToValue(in.OldObject)
			if err != nil {
				return nil, fmt.Errorf("converting oldObject: %w", err)
			}
			old = ast.NewTerm(v)
		}
	}
	return inputTerm(in, jobSetKind, in.Name, object, old, nil), nil
}

// eval runs one policy on one input (the JobSet's, or one of its Pod
// templates', whose messages start with prefix) and sorts its messages
// into d. An evaluation error counts as a violation of the policy, with
// the policy's enforcement action: a Deny policy that cannot decide does
// not let a JobSet through silently, and a Warn or DryRun policy that
// cannot decide never blocks one.
func (p *Policy) eval(ctx context.Context, ev evaluation, input *ast.Term, prefix string, d *Decision, timeout time.Duration, m *metrics) error {
	start := time.Now()
	rs, err := ev.eval(ctx, p.query, input, p.params, timeout)
	m.observeEvaluation(p.Name, time.Since(start))
	if err != nil {
		m.countFailure(p.Name, kindOf(err))
		m.countEvaluation(p.Name, outcomeError)
		// The policy's own enforcement action: an admin's Warn or DryRun
		// policy that cannot decide warns or records, it never blocks.
		p.record(d, p.Action, message{text: prefix + fmt.Sprintf("evaluation failed: %v", err), inexact: true, failed: true}, m)
		return fmt.Errorf("policy %s: %w", p.Name, err)
	}
	denied, warned, dryRun := len(d.Denied), len(d.Warned), len(d.DryRun)
	p.collect(rs, prefix, d, m)
	m.countEvaluation(p.Name, outcome(d, denied, warned, dryRun))
	return nil
}

// collect sorts the policy's decisions in the result of its query (or of
// the built-ins' combined query) into d, each message after prefix.
func (p *Policy) collect(rs rego.ResultSet, prefix string, d *Decision, m *metrics) {
	if len(rs) == 0 {
		return
	}
	doc := map[string]any{}
	for rule, v := range p.bindings {
		doc[rule] = rs[0].Bindings[v]
	}
	// Gatekeeper's violation rule denies as deny does, with its msg.
	denials := append(messages(doc["deny"]), violationMessages(doc["violation"])...)
	slices.Sort(denials)
	for _, msg := range bounded(slices.Compact(denials)) {
		msg.text = prefix + msg.text
		p.record(d, p.Action, msg, m)
	}
	warnAction := Warn
	if p.Action == DryRun {
		warnAction = DryRun
	}
	for _, msg := range bounded(messages(doc["warn"])) {
		msg.text = prefix + msg.text
		p.record(d, warnAction, msg, m)
	}
	ops, _ := doc["patch"].([]any)
	var wouldPatch []string
	for _, op := range ops {
		o, ok := op.(map[string]any)
		if !ok {
			continue
		}
		if p.Action == DryRun {
			// What it would have patched, recorded; the object is left
			// alone.
			raw, _ := json.Marshal(o)
			wouldPatch = append(wouldPatch, "would patch: "+string(raw))
			continue
		}
		d.Patches = append(d.Patches, Patch{Policy: p.Name, Action: p.Action, Op: o})
	}
	for _, msg := range bounded(wouldPatch) {
		p.record(d, DryRun, msg, m)
	}
}

// violationMessages returns the msg of each result of a Gatekeeper-style
// violation rule ({"msg": ..., "details": ...}); a result without one is
// shown whole, so that it still denies with something to read.
func violationMessages(v any) []string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, it := range items {
		if obj, ok := it.(map[string]any); ok {
			if msg, ok := obj["msg"].(string); ok {
				out = append(out, msg)
				continue
			}
		}
		raw, _ := json.Marshal(it)
		out = append(out, string(raw))
	}
	return out
}

func (p *Policy) record(d *Decision, action EnforcementAction, msg message, m *metrics) {
	v := Violation{Policy: p.Name, Message: msg.text, Inexact: msg.inexact, Failed: msg.failed, Builtin: p.builtin}
	switch action {
	case Deny:
		d.Denied = append(d.Denied, v)
	case Warn:
		d.Warned = append(d.Warned, v)
	default:
		d.DryRun = append(d.DryRun, v)
	}
	m.countDecision(p.Name, action)
}

// messages returns the strings of a rule's set, sorted (sets have no order).
func messages(v any) []string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, it := range items {
		if s, ok := it.(string); ok {
			out = append(out, s)
		} else {
			out = append(out, fmt.Sprint(it))
		}
	}
	sort.Strings(out)
	return out
}
