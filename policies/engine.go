package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/inplace-dev/inplace/policies/builtin"
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

	query rego.PreparedEvalQuery
	// inventory is the data.inventory query reads, and prepareFor
	// prepares query again for another one.
	inventory  *Inventory
	prepareFor func(*Inventory) (rego.PreparedEvalQuery, error)
	// health of this version's evaluations (admin policies only).
	health *policyHealth
	// params are Parameters converted once, at Compile.
	params ast.Value
	// bindings name the query's variable of each decision rule.
	bindings map[string]string
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

// Engine evaluates the built-in policies and the current admin policies.
type Engine struct {
	// allBuiltins evaluates every built-in in one query, the admission
	// path's common case; builtins, one query each, are evaluated only when
	// it fails, so that an error is the failing built-in's alone and every
	// other still decides.
	allBuiltins rego.PreparedEvalQuery
	builtins    []*Policy
	// admin is replaced as a whole on every change; readers never lock.
	admin atomic.Pointer[[]*Policy]
	mu    sync.Mutex // serializes writers of admin
	// metrics are nil until RegisterMetrics.
	metrics *metrics
	limits  Limits
	// onHealthChange, if set, is told of a policy that starts or stops
	// failing.
	onHealthChange func(policy string)
	// inventory is data.inventory of every admin policy compiled by
	// Compile.
	inventory *Inventory
	// exempt namespaces no admin policy applies to.
	exempt atomic.Pointer[[]string]
}

// NewEngine compiles the built-in policies, less the disabled ones.
func NewEngine(disabled []string) (*Engine, error) {
	names, err := BuiltinNames()
	if err != nil {
		return nil, err
	}
	for _, d := range disabled {
		if !slices.Contains(names, d) {
			return nil, fmt.Errorf("policies.disabledBuiltins: %q is not a built-in policy; the built-ins are %s", d, strings.Join(names, ", "))
		}
	}
	modules := map[string]string{}
	for _, n := range names {
		if slices.Contains(disabled, n) {
			continue
		}
		src, err := fs.ReadFile(builtin.FS, n+".rego")
		if err != nil {
			return nil, err
		}
		modules[n] = string(src)
	}
	return newEngine(modules)
}

// newEngine prepares a query per built-in module (named by its package's
// last part, as its file), each compiled with all of them.
func newEngine(builtins map[string]string) (*Engine, error) {
	e := &Engine{limits: DefaultLimits(), inventory: NewInventory(0)}
	e.admin.Store(&[]*Policy{})
	e.exempt.Store(&[]string{})
	files := map[string]string{}
	modules := map[string]*ast.Module{}
	for name, src := range builtins {
		file := "builtin/" + name + ".rego"
		// Each is queried by its name: a package named otherwise would be
		// an undefined document, a built-in that silently decides nothing.
		module, err := ast.ParseModuleWithOpts(file, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("compiling built-in policy %s: %w", name, err)
		}
		if want := "data." + builtinPackage + "." + name; module.Package.Path.String() != want {
			return nil, fmt.Errorf("built-in policy %s: package %s, want %s", file, module.Package.Path, strings.TrimPrefix(want, "data."))
		}
		if err := checkSandbox(module); err != nil {
			return nil, fmt.Errorf("built-in policy %s: %w", name, err)
		}
		files[file] = src
		modules[name] = module
	}
	var all []string
	for _, name := range slices.Sorted(maps.Keys(builtins)) {
		body, bindings := decisionQuery(modules[name], name+"_")
		q, err := prepare(files, strings.Join(body, "; "), ast.RegoV1, nil)
		if err != nil {
			return nil, fmt.Errorf("compiling built-in policy %s: %w", name, err)
		}
		e.builtins = append(e.builtins, &Policy{Name: name, Action: Deny, query: q, bindings: bindings})
		all = append(all, body...)
	}
	if len(all) > 0 {
		q, err := prepare(files, strings.Join(all, "; "), ast.RegoV1, nil)
		if err != nil {
			return nil, fmt.Errorf("compiling built-in policies: %w", err)
		}
		e.allBuiltins = q
	}
	return e, nil
}

// decisionRules are the rules of a policy's package the engine reads: its
// helper rules are evaluated only as these need them, and never converted
// into results.
var decisionRules = []string{"deny", "warn", "patch", "violation"}

// decisionQuery returns the query that reads the decision rules module
// defines, each bound to prefix+rule, and the bindings by rule. A rule
// defined only as a partial set (`deny contains msg if ...`, the built-ins'
// shape) is read directly: a partial set is always defined, the empty set
// when no body holds. Any other rule is read through a comprehension, which
// is defined even when the rule is not (a complete patch rule whose body
// fails), so the query always has a result; the comprehension costs an
// evaluation step per message and per rule.
func decisionQuery(module *ast.Module, prefix string) ([]string, map[string]string) {
	defined := map[string]bool{}
	partialSet := map[string]bool{}
	for _, r := range module.Rules {
		// Partial set only if every definition of the rule is one.
		name := r.Head.Ref()[0].String()
		isSet := r.Head.RuleKind() == ast.MultiValue && len(r.Head.Ref()) == 1
		partialSet[name] = isSet && (!defined[name] || partialSet[name])
		defined[name] = true
	}
	var body []string
	bindings := map[string]string{}
	for _, rule := range decisionRules {
		if !defined[rule] {
			continue
		}
		v, ref := prefix+rule, module.Package.Path.String()+"."+rule
		bindings[rule] = v
		switch {
		case rule == "patch" || rule == "violation":
			body = append(body, fmt.Sprintf("%s := [x | x := %s[_]]", v, ref))
		case partialSet[rule]:
			body = append(body, fmt.Sprintf("%s := %s", v, ref))
		default:
			body = append(body, fmt.Sprintf("%s := {x | x := %s[_]}", v, ref))
		}
	}
	if len(body) == 0 {
		// A package that decides nothing still compiles and evaluates.
		body = append(body, prefix+"none := true")
	}
	return body, bindings
}

// BuiltinNames lists the built-in policies.
func BuiltinNames() ([]string, error) {
	entries, err := fs.ReadDir(builtin.FS, ".")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".rego") && !strings.HasSuffix(n, "_test.rego") {
			names = append(names, strings.TrimSuffix(n, ".rego"))
		}
	}
	return names, nil
}

// Source is what an admin policy is compiled from.
type Source struct {
	// Name identifies the policy in messages, metrics and status.
	Name string
	// Rego is one module; its package is the policy's document.
	Rego string
	// RegoVersion is its syntax; empty means v1.
	RegoVersion RegoVersion
	// Action applies to deny and violation messages; empty means Deny.
	Action EnforcementAction
	// Target is what the policy is evaluated on; empty means the JobSet.
	Target Target
	// Match selects the requests the policy applies to; nil selects all.
	Match func(Input) bool
	// Parameters are passed as input.parameters.
	Parameters any
	// Inventory is the policy's data.inventory; nil is an empty one. A
	// policy put in an engine must be compiled with the engine's
	// (Engine.Compile).
	Inventory *Inventory
}

// Compile compiles an admin policy from one Rego module. The policy's
// document is the module's package; errors name the line.
func Compile(src Source) (*Policy, error) {
	name := src.Name
	file := name + ".rego"
	version := ast.RegoV1
	switch src.RegoVersion {
	case "", RegoV1:
	case RegoV0:
		version = ast.RegoV0
	default:
		return nil, fmt.Errorf("spec.regoVersion: %q is not a Rego version: use v1, or v0 for a policy in the syntax before OPA 1.0", src.RegoVersion)
	}
	target := src.Target
	switch target {
	case "":
		target = TargetJobSet
	case TargetJobSet, TargetPodTemplates:
	default:
		return nil, fmt.Errorf("spec.target: %q is not a target: use JobSet or PodTemplates", src.Target)
	}
	module, err := ast.ParseModuleWithOpts(file, src.Rego, ast.ParserOptions{RegoVersion: version})
	if err != nil {
		if version == ast.RegoV1 && strings.Contains(err.Error(), "rego_parse_error") {
			// The most common cause, by far: a policy from Gatekeeper's
			// library or written for OPA before 1.0.
			return nil, fmt.Errorf("%w\n(if this policy is written in the syntax before OPA 1.0, as Gatekeeper's library is, set spec.regoVersion: v0)", err)
		}
		return nil, err
	}
	if strings.HasPrefix(module.Package.Path.String(), "data."+builtinPackage) {
		return nil, fmt.Errorf("%s: package %s is reserved for built-in policies", file, module.Package.Path)
	}
	if err := checkSandbox(module); err != nil {
		return nil, err
	}
	body, bindings := decisionQuery(module, "")
	if len(bindings) == 0 {
		// It would compile, report Ready and enforce nothing.
		return nil, fmt.Errorf("%s: package %s defines no deny, violation, warn or patch rule, so the policy would enforce nothing: add one, e.g. `deny contains msg if { ... }`", file, strings.TrimPrefix(module.Package.Path.String(), "data."))
	}
	if _, patches := bindings["patch"]; patches && target == TargetPodTemplates {
		return nil, fmt.Errorf("%s: a policy with spec.target PodTemplates has no patch rules: it sees each Pod template apart from its JobSet; patch the JobSet with a policy of target JobSet", file)
	}
	inventory := src.Inventory
	if inventory == nil {
		inventory = NewInventory(0)
	}
	prepareFor := func(inv *Inventory) (rego.PreparedEvalQuery, error) {
		return prepare(map[string]string{file: src.Rego}, strings.Join(body, "; "), version, inv)
	}
	q, err := prepareFor(inventory)
	if err != nil {
		return nil, err
	}
	action := src.Action
	if action == "" {
		action = Deny
	}
	p := &Policy{Name: name, Action: action, Target: target, Match: src.Match, Parameters: src.Parameters, query: q, bindings: bindings, health: &policyHealth{},
		inventory: inventory, prepareFor: prepareFor}
	if src.Parameters != nil {
		if p.params, err = ast.InterfaceToValue(src.Parameters); err != nil {
			return nil, fmt.Errorf("policy %s: parameters: %w", name, err)
		}
	}
	return p, nil
}

// Compile compiles an admin policy that reads the engine's inventory.
func (e *Engine) Compile(src Source) (*Policy, error) {
	src.Inventory = e.inventory
	return Compile(src)
}

// Inventory is the engine's data.inventory.
func (e *Engine) Inventory() *Inventory { return e.inventory }

// SetExemptNamespaces sets the namespaces no admin policy applies to; a
// trailing * matches any suffix.
func (e *Engine) SetExemptNamespaces(namespaces []string) {
	ns := slices.Clone(namespaces)
	e.exempt.Store(&ns)
}

// exempted reports whether no admin policy applies in namespace.
func (e *Engine) exempted(namespace string) bool {
	return MatchesAny(*e.exempt.Load(), namespace)
}

// MatchesAny reports whether s is one of patterns, a pattern ending in *
// matching any string with what precedes the *.
func MatchesAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if prefix, glob := strings.CutSuffix(p, "*"); glob && strings.HasPrefix(s, prefix) || p == s {
			return true
		}
	}
	return false
}

// prepare compiles modules with the sandbox's compiler (see sandbox.go)
// and prepares the query once.
func prepare(modules map[string]string, query string, version ast.RegoVersion, inventory *Inventory) (rego.PreparedEvalQuery, error) {
	opts := []func(*rego.Rego){
		rego.Query(query),
		rego.Compiler(newCompiler(version)),
		rego.Capabilities(sandboxCapabilities()),
		// Strict as OPA 1.0 is; a v0 policy compiles as Gatekeeper
		// compiles it, whose library relies on what strict refuses
		// (deprecated builtins, unused imports).
		rego.Strict(version == ast.RegoV1),
		rego.SetRegoVersion(version),
	}
	if inventory != nil {
		opts = append(opts, rego.Store(inventory))
	}
	files := make([]string, 0, len(modules))
	for f := range modules {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		opts = append(opts, rego.Module(f, modules[f]))
	}
	return rego.New(opts...).PrepareForEval(context.Background())
}

// SetPolicy adds or replaces the admin policy of the same name.
//
// A policy compiled with another inventory than the engine's (Compile
// without Engine.Compile) is prepared again to read the engine's: a
// policy in an engine never reads another data.inventory than the one the
// engine's sync fills.
func (e *Engine) SetPolicy(p *Policy) {
	if p.inventory != e.inventory && p.prepareFor != nil {
		q, err := p.prepareFor(e.inventory)
		if err != nil {
			// The same module and query prepared once already.
			panic(fmt.Sprintf("policy %s compiled, but not again for the engine's inventory: %v", p.Name, err))
		}
		p.query, p.inventory = q, e.inventory
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	old := *e.admin.Load()
	next := make([]*Policy, 0, len(old)+1)
	for _, q := range old {
		if q.Name != p.Name {
			next = append(next, q)
		} else if p.Generation != 0 && q.Generation == p.Generation && q.UID == p.UID {
			// The same version compiled again keeps what was learned of
			// its evaluations; a new one is judged on its own.
			p.health = q.health
		}
	}
	next = append(next, p)
	sort.Slice(next, func(i, j int) bool { return next[i].Name < next[j].Name })
	e.admin.Store(&next)
}

// InForce reports whether generation of the object uid is the admin
// policy of that name in force.
func (e *Engine) InForce(name, uid string, generation int64) bool {
	for _, p := range *e.admin.Load() {
		if p.Name == name {
			return generation != 0 && p.Generation == generation && p.UID == uid
		}
	}
	return false
}

// RemovePolicy removes the admin policy of that name, if any.
func (e *Engine) RemovePolicy(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := *e.admin.Load()
	next := make([]*Policy, 0, len(old))
	for _, q := range old {
		if q.Name != name {
			next = append(next, q)
		}
	}
	e.admin.Store(&next)
}

// HasAdminPolicies reports whether any admin policy is in force.
func (e *Engine) HasAdminPolicies() bool { return len(*e.admin.Load()) > 0 }

// Policies returns the names of the admin policies in force.
func (e *Engine) Policies() []string {
	var out []string
	for _, p := range *e.admin.Load() {
		out = append(out, p.Name)
	}
	return out
}

// Evaluate runs every built-in and matching admin policy on in. The input
// is converted once and shared by every policy.
func (e *Engine) Evaluate(ctx context.Context, in Input) (Decision, error) {
	return e.evaluate(ctx, in, true, true, false)
}

// EvaluateAdmin runs only the matching admin policies that have patch
// rules, for those rules.
func (e *Engine) EvaluateAdmin(ctx context.Context, in Input) (Decision, error) {
	return e.evaluate(ctx, in, false, true, true)
}

// Audit runs the matching admin policies for the audit. Its evaluations
// say nothing of a policy's health: the audit's own time budget cuts
// them short, through no fault of the policy.
func (e *Engine) Audit(ctx context.Context, in Input) (Decision, error) {
	return e.evaluate(ctx, in, false, false, false)
}

func (e *Engine) evaluate(ctx context.Context, in Input, builtins, judgeHealth, patchesOnly bool) (Decision, error) {
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
	if builtins {
		errs = e.evalBuiltins(ctx, base, &d)
	}
	if e.exempted(in.Namespace) {
		return d, errors.Join(errs...)
	}
	var pods []podInput // made once, for the first PodTemplates policy (nil: not yet)
	for _, p := range *e.admin.Load() {
		if p.Match != nil && !p.Match(in) {
			continue
		}
		if _, patches := p.bindings["patch"]; patchesOnly && !patches {
			continue
		}
		d.Evaluated = append(d.Evaluated, p.Name)
		var err error
		if p.Target == TargetPodTemplates {
			if pods == nil {
				pods = podInputs(in, base)
			}
			var perPod []error
			for _, pod := range pods {
				perPod = append(perPod, p.eval(ctx, pod.input, pod.prefix, &d, e.limits.PolicyTimeout, e.metrics))
			}
			err = errors.Join(perPod...)
		} else {
			err = p.eval(ctx, base, "", &d, e.limits.PolicyTimeout, e.metrics)
		}
		// A policy reached after the request's deadline, or cut short by
		// its caller, failed through no fault of its own.
		if judgeHealth && (err == nil || ctx.Err() == nil) && p.health.observe(err) && e.onHealthChange != nil {
			e.onHealthChange(p.Name)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return d, errors.Join(errs...)
}

// evalBuiltins evaluates the built-ins in one query and sorts each one's
// messages under its name; if that query fails, it evaluates each on its
// own.
func (e *Engine) evalBuiltins(ctx context.Context, base *ast.Term, d *Decision) []error {
	if len(e.builtins) == 0 {
		return nil
	}
	start := time.Now()
	// The built-ins are the project's own code: only the request's limit,
	// already on ctx, bounds them.
	rs, err := evalBounded(ctx, e.allBuiltins, base.Value, 0)
	e.metrics.observeEvaluation("builtin", time.Since(start))
	if err == nil {
		for _, p := range e.builtins {
			p.collect(rs, "", d, e.metrics)
		}
		return nil
	}
	var errs []error
	for _, p := range e.builtins {
		if err := p.eval(ctx, base, "", d, 0, e.metrics); err != nil {
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
func (p *Policy) eval(ctx context.Context, base *ast.Term, prefix string, d *Decision, timeout time.Duration, m *metrics) error {
	input := base.Value
	if p.params != nil {
		// A new top-level object over the same terms: a copy of the
		// JobSet per policy cost 26 KB and 100 µs each, 100 ms per request
		// with 1,000 policies. Evaluation never writes its input.
		items := make([][2]*ast.Term, 0, base.Value.(ast.Object).Len()+1)
		base.Value.(ast.Object).Foreach(func(k, v *ast.Term) { items = append(items, [2]*ast.Term{k, v}) })
		items = append(items, [2]*ast.Term{ast.StringTerm("parameters"), ast.NewTerm(p.params)})
		input = ast.NewObject(items...)
	}
	start := time.Now()
	rs, err := evalBounded(ctx, p.query, input, timeout)
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
	v := Violation{Policy: p.Name, Message: msg.text, Inexact: msg.inexact, Failed: msg.failed}
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
