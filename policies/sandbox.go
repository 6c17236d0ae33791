package policies

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Every policy, built-in or an admin's, and every test `inplacectl policy
// test` runs, is compiled by one compiler: strict, Rego v1, and with the
// capabilities below. A policy runs inside the admission path of every
// JobSet and inside the manager, so what it may call is what a pure
// function of its input may call: nothing that reaches the network, the
// manager's files or environment, or that answers differently on another
// replica or on a retry of the same request.

// deniedBuiltins are the builtins taken out of the capabilities, each with
// why. Every builtin OPA marks nondeterministic is taken out too (see
// sandboxCapabilities); those that are also listed here say more precisely
// why.
var deniedBuiltins = map[string]string{
	"http.send":          "it reaches the network",
	"net.lookup_ip_addr": "it reaches the network (DNS)",
	"opa.runtime":        "it reveals the manager's environment and configuration",
	// gojsonschema resolves a schema's $ref to any URL, file:// included,
	// and OPA has no switch to turn that off: a $ref would read the
	// manager's files into a denial message.
	"json.match_schema":  "it resolves a schema's $ref to any URL or file",
	"json.verify_schema": "it resolves a schema's $ref to any URL or file",
	"time.now_ns":        "its answer differs between replicas and retries of the same request",
	"rand.intn":          "its answer differs between replicas and retries of the same request",
	"uuid.rfc4122":       "its answer differs between replicas and retries of the same request",
}

// sandboxCapabilities returns the capabilities every policy is compiled
// with: this OPA's builtins less the denied and the nondeterministic ones,
// and no host to reach (allow_net empty, not nil: nil would allow all).
// Made once and shared, read-only, by every compiler: each compiled policy
// holds its compiler, and a copy each was a tenth of a policy's memory.
var sandboxCapabilities = sync.OnceValue(func() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	kept := make([]*ast.Builtin, 0, len(caps.Builtins))
	for _, b := range caps.Builtins {
		if !denied(b) {
			kept = append(kept, b)
		}
	}
	caps.Builtins = kept
	caps.AllowNet = []string{}
	return caps
})

// denied says whether no policy may call b: it is on the list, or OPA
// marks it nondeterministic.
func denied(b *ast.Builtin) bool {
	_, listed := deniedBuiltins[b.Name]
	return listed || b.IsNondeterministic()
}

// deniedBecause returns why a builtin is denied, or "" if it is allowed.
func deniedBecause(name string) string {
	if why, ok := deniedBuiltins[name]; ok {
		return why
	}
	if b, ok := ast.BuiltinMap[name]; ok && b.IsNondeterministic() {
		return "its answer differs between replicas and retries of the same request"
	}
	return ""
}

// DeniedBuiltins lists the builtins no policy may call, sorted.
func DeniedBuiltins() []string {
	var out []string
	for name, b := range ast.BuiltinMap {
		if denied(b) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// checkSandbox returns an error for each call module makes to a denied
// builtin, naming it, its line and why. The compiler would refuse the call
// too, as an undefined function; this says why, so that the author looks
// for another way rather than for a typo.
func checkSandbox(module *ast.Module) error {
	var errs []string
	report := func(name string, loc *ast.Location) {
		why := deniedBecause(name)
		if why == "" {
			return
		}
		where := module.Package.Location.File
		if loc != nil {
			where = fmt.Sprintf("%s:%d", loc.File, loc.Row)
		}
		errs = append(errs, fmt.Sprintf("%s: %s is not allowed in a policy: %s; policies run sandboxed, with no network, files, environment, clock or randomness (see docs/explanation/security.md)", where, name, why))
	}
	ast.WalkExprs(module, func(e *ast.Expr) bool {
		if e.IsCall() {
			report(e.Operator().String(), e.Location)
		}
		return false
	})
	ast.WalkTerms(module, func(t *ast.Term) bool {
		if call, ok := t.Value.(ast.Call); ok && len(call) > 0 {
			report(call[0].String(), t.Location)
		}
		return false
	})
	if len(errs) == 0 {
		return nil
	}
	slices.Sort(errs)
	return fmt.Errorf("%s", strings.Join(slices.Compact(errs), "\n"))
}

// newCompiler returns the compiler of every policy and every policy test:
// with the sandbox's capabilities, and strict for Rego v1.
func newCompiler(version ast.RegoVersion) *ast.Compiler {
	return ast.NewCompiler().
		WithCapabilities(sandboxCapabilities()).
		WithStrict(version == ast.RegoV1).
		// As rego.New's own compiler: `# METADATA` schemas type-check.
		WithUseTypeCheckAnnotations(true).
		WithDefaultRegoVersion(version)
}
