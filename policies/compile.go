package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/inplace-dev/inplace/policies/builtin"
)

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
	var params ast.Value
	var paramsJSON json.RawMessage
	if src.Parameters != nil {
		var err error
		if params, err = ast.InterfaceToValue(src.Parameters); err != nil {
			return nil, fmt.Errorf("policy %s: parameters: %w", name, err)
		}
		if paramsJSON, err = valueJSON(params); err != nil {
			return nil, fmt.Errorf("policy %s: parameters: %w", name, err)
		}
	}
	reads := readsInventory(module)
	prepareFor := func(inv *Inventory) (*preparedQuery, error) {
		q, err := prepare(map[string]string{file: src.Rego}, strings.Join(body, "; "), version, inv)
		if err != nil {
			return nil, err
		}
		q.source.Parameters = paramsJSON
		// An evaluator process is sent the inventory only for a policy
		// that reads it.
		q.source.Inventory = reads
		return q, nil
	}
	q, err := prepareFor(inventory)
	if err != nil {
		return nil, err
	}
	action := src.Action
	if action == "" {
		action = Deny
	}
	return &Policy{Name: name, Action: action, Target: target, Match: src.Match, Parameters: src.Parameters, query: q, params: params, bindings: bindings, health: &policyHealth{},
		inventory: inventory, prepareFor: prepareFor}, nil
}

// readsInventory reports whether module may read data.inventory: a
// reference to it, or to data at a key it does not name.
func readsInventory(module *ast.Module) bool {
	reads := false
	ast.WalkRefs(module, func(ref ast.Ref) bool {
		if !ref.HasPrefix(ast.DefaultRootRef) {
			return false
		}
		if len(ref) < 2 {
			reads = true
			return true
		}
		if key, ok := ref[1].Value.(ast.String); !ok || key == "inventory" {
			reads = true
		}
		return reads
	})
	return reads
}

// Compile compiles an admin policy that reads the engine's inventory.
func (e *Engine) Compile(src Source) (*Policy, error) {
	src.Inventory = e.inventory
	return Compile(src)
}

// prepare compiles modules with the sandbox's compiler (see sandbox.go)
// and prepares the query once; the query keeps its source, for an
// evaluator process to prepare it again (see evaluator.go).
func prepare(modules map[string]string, query string, version ast.RegoVersion, inventory *Inventory) (*preparedQuery, error) {
	q, err := prepareEval(modules, query, version, inventory)
	if err != nil {
		return nil, err
	}
	return &preparedQuery{PreparedEvalQuery: q, source: querySource{Modules: modules, Query: query, RegoV0: version == ast.RegoV0, Inventory: inventory != nil}}, nil
}

func prepareEval(modules map[string]string, query string, version ast.RegoVersion, inventory *Inventory) (rego.PreparedEvalQuery, error) {
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
