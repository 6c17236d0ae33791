package policies

import (
	"fmt"
	"math"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// What one builtin call may build. A policy's time limit stops it between
// two calls, never inside one: OPA checks cancellation as it evaluates,
// and a builtin is one Go call. Some builtins on the sandbox's list build
// a result far larger than their arguments: replace(s, "a", s) squares
// s, concat repeats its separator once per element, json.marshal writes
// a value whose parts are shared (array.concat([a], [a]), 25 times) once
// per path to each part. One such call asked for gigabytes and ran for
// seconds past the limit; a failed allocation is a fatal error that no
// recover catches. So each of them is wrapped: the wrapper computes, from
// the arguments and without building it, how large the result would be,
// refuses the call past the limits below, and calls OPA's own
// implementation otherwise.
//
// The limits are per call. A JobSet is at most 1.5 MiB when stored (etcd's
// request limit) and 3 MiB in a request (the apiserver's), so 4 MiB holds
// json.marshal of any JobSet and yaml.marshal of any stored one; its
// longest lists (containers, env, volumes, replicated Jobs) hold
// thousands of items, so 262,144 values hold any array or object built
// from it. A call at a limit allocates some 10 to 50 MB in 10 to 130 ms
// (bounds_test.go).
const (
	// maxResultBytes bounds a string one builtin call builds.
	maxResultBytes = 4 << 20
	// maxResultValues bounds the values (array elements, set members,
	// object entries) one builtin call builds, or holds at once while
	// building its result.
	maxResultValues = 1 << 18
)

// size is what a call would build, as computed before the call.
type size struct {
	// bytes of the string it returns; values of the arrays, sets and
	// objects it builds.
	bytes, values int
	// exact: the numbers are the result's own, not bounds on it.
	exact bool
}

// sizeOf computes a call's size from its operands (its arguments, maybe
// followed by its output). It never builds the result: it counts, and
// stops counting once past the limits. An operand of the wrong type is
// left to the builtin's own error: sizeOf counts nothing for it.
type sizeOf func(operands []*ast.Term) size

// boundedBuiltins are the builtins whose result can outgrow their
// arguments, each with the size of a call. Every other builtin on the
// sandbox's list builds a result no larger than a constant times its
// arguments (sandbox.go says why, family by family).
var boundedBuiltins = map[string]sizeOf{
	// Strings (bounds_strings.go).
	ast.Replace.Name:                replaceSize,
	ast.ReplaceN.Name:               replaceNSize,
	ast.RegexReplace.Name:           regexReplaceSize,
	ast.Concat.Name:                 concatSize,
	ast.Sprintf.Name:                sprintfSize,
	ast.InternalTemplateString.Name: templateStringSize,
	ast.URLQueryEncodeObject.Name:   urlQueryEncodeObjectSize,
	// Encodings (bounds_encodings.go).
	ast.JSONMarshal.Name:            jsonMarshalSize,
	ast.JSONMarshalWithOptions.Name: jsonMarshalWithOptionsSize,
	ast.YAMLMarshal.Name:            yamlMarshalSize,
	// Arrays, sets and objects (bounds_collections.go).
	ast.ArrayConcat.Name:                arrayConcatSize,
	ast.ObjectUnion.Name:                objectUnionSize,
	ast.ObjectUnionN.Name:               objectUnionNSize,
	ast.JSONRemove.Name:                 jsonPathsSize,
	ast.JSONFilter.Name:                 jsonPathsSize,
	ast.JSONPatch.Name:                  jsonPatchSize,
	ast.RegexFindAllStringSubmatch.Name: regexFindAllStringSubmatchSize,
}

// registerBounds replaces each bounded builtin's implementation with its
// wrapper, for the whole process: OPA looks a builtin's implementation up
// by name in one global table, before any function of the query's own, so
// there is no per-evaluation way to replace it. This process evaluates
// only sandboxed policies (and `inplacectl policy test` only tests of
// them), so every evaluation it runs is bounded the same way. The
// package's init calls it (evaluator_serve.go), before any evaluation
// reads the table.
func registerBounds() {
	for name, f := range boundedBuiltins {
		original := topdown.GetBuiltin(name)
		if original == nil {
			// Renamed or removed by an OPA upgrade: the wrapper would
			// call nothing at the first policy that uses it.
			panic(fmt.Sprintf("policies: the bounded builtin %s has no implementation in this OPA", name))
		}
		topdown.RegisterBuiltinFunc(name, boundedBuiltin(name, original, f))
	}
}

// boundedBuiltin calls original unless the call's size is past a limit.
// A refusal halts the evaluation, as a timeout does: an error would only
// make the expression undefined, and a deny rule that stops being true
// when its input grows large enough would let that input through.
func boundedBuiltin(name string, original topdown.BuiltinFunc, sizeOf sizeOf) topdown.BuiltinFunc {
	return func(bctx topdown.BuiltinContext, operands []*ast.Term, iter func(*ast.Term) error) error {
		if msg := sizeOf(operands).refusal(); msg != "" {
			return topdown.Halt{Err: &topdown.Error{Code: topdown.BuiltinErr, Message: name + ": " + msg, Location: bctx.Location}}
		}
		return original(bctx, operands, iter)
	}
}

// refusal says why a call of this size is refused, or "" if it is not.
func (s size) refusal() string {
	switch {
	case s.bytes > maxResultBytes:
		return s.describe(s.bytes, maxResultBytes, "be", "bytes")
	case s.values > maxResultValues:
		return s.describe(s.values, maxResultValues, "hold", "values")
	}
	return ""
}

func (s size) describe(n, limit int, verb, unit string) string {
	would := "would"
	if !s.exact {
		would = "could"
	}
	switch {
	case n == overLimit(limit) || n >= saturated:
		return fmt.Sprintf("the result %s %s more than the sandbox's limit of %d %s", would, verb, limit, unit)
	case s.exact:
		return fmt.Sprintf("the result would %s %d %s, above the sandbox's limit of %d", verb, n, unit, limit)
	default:
		return fmt.Sprintf("the result could %s up to %d %s, above the sandbox's limit of %d", verb, n, unit, limit)
	}
}

// overLimit is what a count that stopped past limit reports.
func overLimit(limit int) int { return limit + 1 }

// counter counts up to just past a limit, and then stops: a walk over a
// value whose parts are shared visits each part once per path to it, so
// a walk must stop as soon as it knows enough. Every array, set or object
// a walk visits adds at least one, so it visits at most about limit of
// them, and their items.
type counter struct{ n, limit int }

func newCounter(limit int) *counter { return &counter{limit: limit} }

// add adds k and reports whether counting should go on.
func (c *counter) add(k int) bool {
	c.n = satAdd(c.n, k)
	return c.n <= c.limit
}

func (c *counter) over() bool { return c.n > c.limit }

// total is the count, or overLimit if it stopped past the limit.
func (c *counter) total() int {
	if c.over() {
		return overLimit(c.limit)
	}
	return c.n
}

// satAdd and satMul saturate at a value no count reaches, so that sizes
// computed from lengths the policy chooses never wrap around.
const saturated = math.MaxInt / 4

func satAdd(a, b int) int { return min(a+min(b, saturated), saturated) }

func satMul(a, b int) int {
	if a == 0 || b == 0 {
		return 0
	}
	if a > saturated/b {
		return saturated
	}
	return a * b
}

// arg is the i-th argument of a call, nil if there is none.
func arg(operands []*ast.Term, i int) ast.Value {
	if i < len(operands) {
		return operands[i].Value
	}
	return nil
}
