package policies

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/inplace-dev/inplace/policies/builtin"
)

// Engine evaluates the built-in policies and the current admin policies.
type Engine struct {
	// allBuiltins evaluates every built-in in one query, the admission
	// path's common case; builtins, one query each, are evaluated only when
	// it fails, so that an error is the failing built-in's alone and every
	// other still decides.
	allBuiltins *preparedQuery
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
	// processes evaluate the policies when set (Isolate); nil: this
	// process does.
	processes atomic.Pointer[evaluatorPool]
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
		e.builtins = append(e.builtins, &Policy{Name: name, Action: Deny, query: q, bindings: bindings, builtin: true})
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
	var dropped *preparedQuery
	for _, q := range old {
		if q.Name != p.Name {
			next = append(next, q)
			continue
		}
		if p.Generation != 0 && q.Generation == p.Generation && q.UID == p.UID {
			// The same version compiled again keeps what was learned of
			// its evaluations; a new one is judged on its own.
			p.health = q.health
		}
		if q.query.ID() != p.query.ID() {
			dropped = q.query
		}
	}
	next = append(next, p)
	sort.Slice(next, func(i, j int) bool { return next[i].Name < next[j].Name })
	e.admin.Store(&next)
	// Once no new request can find it.
	e.forget(dropped)
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
	var dropped *preparedQuery
	for _, q := range old {
		if q.Name != name {
			next = append(next, q)
		} else {
			dropped = q.query
		}
	}
	e.admin.Store(&next)
	e.forget(dropped)
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
