package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// TestBoundedBuiltinsAreAllowed: each wrapper wraps a builtin of this
// OPA that a policy may call.
func TestBoundedBuiltinsAreAllowed(t *testing.T) {
	for name := range boundedBuiltins {
		if ast.BuiltinMap[name] == nil || topdown.GetBuiltin(name) == nil {
			t.Errorf("%s is bounded but not a builtin of this OPA", name)
		}
		if !allowedBuiltins[name] {
			t.Errorf("%s is bounded but not allowed: drop its bound", name)
		}
	}
}

// repeat is s n times, as a Rego string.
func repeat(s string, n int) string { return strings.Repeat(s, n) }

// TestBoundsAtTheLimit calls each bounded builtin with a result just at
// its limit, which it builds, and just past it, which it refuses before
// building anything; and with what took seconds and gigabytes before it
// was bounded, which it refuses as fast. Sizes come from the input (long
// strings) or are built in a few steps by the policy (arrays and objects
// whose parts are shared).
func TestBoundsAtTheLimit(t *testing.T) {
	const mib = maxResultBytes
	in := map[string]any{
		"a2048":    repeat("a", 2048),
		"b2008":    repeat("b", 2008),
		"b2009":    repeat("b", 2009),
		"b2048":    repeat("b", 2048),
		"b2049":    repeat("b", 2049),
		"a100k":    repeat("a", 100_000),
		"sep4096":  repeat(",", 4096),
		"sep4097":  repeat(",", 4097),
		"k4094":    repeat("k", 4094),
		"k4095":    repeat("k", 4095),
		"a4095":    repeat("a", 4095),
		"a4096":    repeat("a", 4096),
		"mib":      repeat("m", mib),
		"mib-4":    repeat("m", mib-4),
		"mib-3":    repeat("m", mib-3),
		"mib-8":    repeat("m", mib-8),
		"mib-7":    repeat("m", mib-7),
		"mib-15":   repeat("m", mib-15),
		"mib-14":   repeat("m", mib-14),
		"mib-130":  repeat("m", mib-130),
		"mib-128":  repeat("m", mib-128),
		"groups62": repeat("(b?)", 62),
	}
	// steps assigns x0 and then each xi from x(i-1) by step (%[1]s).
	steps := func(x, first string, n int, step string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%s0 := %s\n", x, first)
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "\t%s%d := %s\n", x, i, fmt.Sprintf(step, fmt.Sprintf("%s%d", x, i-1)))
		}
		return b.String()
	}
	// shared is a value of 2^n leaves built in n steps of two pointers.
	shared := func(leaf string, n int) string { return steps("x", leaf, n, "array.concat([%[1]s], [%[1]s])") }
	sharedObject := func(x, leaf string, n int) string {
		return steps(x, `{"x": `+leaf+`}`, n, `object.union({"a": %[1]s}, {"b": %[1]s})`)
	}
	// wide is an object of k keys, each the same object of w keys.
	wide := func(name string, k, w, leaf int) string {
		return fmt.Sprintf("%s_w := {sprintf(\"%%d\", [j]): %d | some j in numbers.range(1, %d)}\n\t%s := {sprintf(\"%%d\", [i]): %s_w | some i in numbers.range(1, %d)}", name, leaf, w, name, name, k)
	}
	paths := func(k int) string {
		return fmt.Sprintf("[sprintf(\"%%d/x\", [i]) | some i in numbers.range(1, %d)]", k)
	}
	adds := func(k int) string {
		return fmt.Sprintf("[{\"op\": \"add\", \"path\": sprintf(\"/%%d/x\", [i]), \"value\": 1} | some i in numbers.range(1, %d)]", k)
	}
	cases := map[string]struct {
		body string
		// want is the refusal; "" if the call is made.
		want string
	}{
		"replace at the limit":  {body: `y := replace(input.object.a2048, "a", input.object.b2048)`},
		"replace past it":       {body: `y := replace(input.object.a2048, "a", input.object.b2049)`, want: "replace: the result would be more than the sandbox's limit of 4194304 bytes"},
		"replace of s by s":     {body: `y := replace(input.object.a100k, "a", input.object.a100k)`, want: "replace: the result would be more than"},
		"replace_n at it":       {body: `y := strings.replace_n({"a": input.object.b2048}, input.object.a2048)`},
		"replace_n past it":     {body: `y := strings.replace_n({"a": input.object.b2049}, input.object.a2048)`, want: "strings.replace_n: the result would be more than"},
		"regex.replace at it":   {body: `y := regex.replace(input.object.a2048, "a", input.object.b2008)`},
		"regex.replace past it": {body: `y := regex.replace(input.object.a2048, "a", input.object.b2009)`, want: "regex.replace: the result could be up to 4196352 bytes"},
		"regex.replace at each position": {
			body: `y := regex.replace(input.object.a100k, "", input.object.a100k)`, want: "regex.replace: the result could be up to",
		},
		"concat at it":   {body: `y := concat(input.object.sep4096, ["" | some _ in numbers.range(1, 1025)])`},
		"concat past it": {body: `y := concat(input.object.sep4097, ["" | some _ in numbers.range(1, 1025)])`, want: "concat: the result would be 4195328 bytes, above the sandbox's limit of 4194304"},
		"concat of many": {body: `y := concat(input.object.a100k, ["" | some _ in numbers.range(1, 100000)])`, want: "concat: the result would be 9999900000 bytes"},
		"sprintf at it":  {body: `y := sprintf("%s", [input.object["mib-130"]])`},
		"sprintf past it": {
			body: `y := sprintf("%s", [input.object["mib-128"]])`, want: "sprintf: the result could be up to 4194306 bytes",
		},
		"sprintf of widths": {
			body: `y := sprintf(concat("", ["%9999999d" | some _ in numbers.range(1, 100)]), [1 | some _ in numbers.range(1, 100)])`,
			want: "sprintf: the result could be up to 1000046116 bytes",
		},
		"sprintf of one argument many times": {
			body: `y := sprintf(concat("", ["%[1]s" | some _ in numbers.range(1, 1000)]), [input.object.a100k])`,
			want: "sprintf: the result could be up to",
		},
		"sprintf of a shared value": {body: shared(`["aaaaaaaaaa"]`, 25) + "\ty := sprintf(\"%v\", [x25])", want: "sprintf: the result could be more than"},
		"template string at it":     {body: `y := $"{input.object.mib}"`},
		"template string past it":   {body: `y := $"{input.object.mib}."`, want: "internal.template_string: the result could be more than the sandbox's limit of 4194304 bytes"},
		"template string of a shared value": {
			body: shared(`["aaaaaaaaaa"]`, 25) + "\ty := $\"{x25}\"", want: "internal.template_string: the result could be more than",
		},
		"urlquery.encode_object at it": {body: `y := urlquery.encode_object({input.object.k4094: ["" | some _ in numbers.range(1, 1024)]})`},
		"urlquery.encode_object past it": {
			body: `y := urlquery.encode_object({input.object.k4095: ["" | some _ in numbers.range(1, 1024)]})`, want: "urlquery.encode_object: the result could be more than",
		},
		"json.marshal at it":   {body: `y := json.marshal([input.object["mib-4"]])`},
		"json.marshal past it": {body: `y := json.marshal([input.object["mib-3"]])`, want: "json.marshal: the result would be more than"},
		"json.marshal of a shared value": {
			body: shared(`["aaaaaaaaaa"]`, 25) + "\ty := json.marshal(x25)", want: "json.marshal: the result would be more than",
		},
		"json.marshal_with_options at it": {body: `y := json.marshal_with_options([input.object["mib-8"]], {"indent": "  "})`},
		"json.marshal_with_options past it": {
			body: `y := json.marshal_with_options([input.object["mib-7"]], {"indent": "  "})`, want: "json.marshal_with_options: the result would be more than",
		},
		"json.marshal_with_options of a long indent": {
			body: `y := json.marshal_with_options([1 | some _ in numbers.range(1, 1000)], {"indent": input.object.a100k})`,
			want: "json.marshal_with_options: the result would be more than",
		},
		"yaml.marshal at it":   {body: `y := yaml.marshal([input.object["mib-15"]])`},
		"yaml.marshal past it": {body: `y := yaml.marshal([input.object["mib-14"]])`, want: "yaml.marshal: the result could be more than"},
		"yaml.marshal of a shared value": {
			body: shared(`["aaaaaaaaaa"]`, 25) + "\ty := yaml.marshal(x25)", want: "yaml.marshal: the result could be more than",
		},
		"array.concat at it":   {body: `y := array.concat(numbers.range(1, 131072), numbers.range(1, 131072))`},
		"array.concat past it": {body: `y := array.concat(numbers.range(1, 131072), numbers.range(1, 131074))`, want: "array.concat: the result would hold 262146 values, above the sandbox's limit of 262144"},
		"array.concat doubling": {
			body: steps("x", "[1]", 30, "array.concat(%[1]s, %[1]s)") + "\ty := x30",
			want: "array.concat: the result would hold 524288 values",
		},
		"object.union at it":   {body: wide("a", 256, 511, 1) + "\n\t" + wide("b", 256, 511, 2) + "\n\ty := object.union(a, b)"},
		"object.union past it": {body: wide("a", 256, 512, 1) + "\n\t" + wide("b", 256, 512, 2) + "\n\ty := object.union(a, b)", want: "object.union: the result could hold more than the sandbox's limit of 262144 values"},
		"object.union of shared values": {
			body: sharedObject("o", "1", 25) + "\t" + sharedObject("p", "2", 25) + "\ty := object.union(o25, p25)", want: "object.union: the result could hold more than",
		},
		"object.union_n at it":   {body: wide("a", 256, 511, 1) + "\n\t" + wide("b", 256, 511, 2) + "\n\ty := object.union_n([a, b])"},
		"object.union_n past it": {body: wide("a", 256, 512, 1) + "\n\t" + wide("b", 256, 512, 2) + "\n\ty := object.union_n([a, b])", want: "object.union_n: the result could hold more than"},
		"object.union_n of a shared value": {
			body: sharedObject("o", "1", 25) + "\ty := object.union_n([o25, {}])", want: "object.union_n: the result could hold more than",
		},
		"json.remove at it":   {body: wide("a", 256, 1023, 1) + "\n\ty := json.remove(a, " + paths(256) + ")"},
		"json.remove past it": {body: wide("a", 256, 1024, 1) + "\n\ty := json.remove(a, " + paths(256) + ")", want: "json.remove: the result could hold more than"},
		"json.remove of many paths": {
			body: wide("a", 5000, 5000, 1) + "\n\ty := json.remove(a, " + paths(5000) + ")", want: "json.remove: the result could hold more than",
		},
		"json.filter at it":   {body: wide("a", 256, 1023, 1) + "\n\ty := json.filter(a, " + paths(256) + ")"},
		"json.filter past it": {body: wide("a", 256, 1024, 1) + "\n\ty := json.filter(a, " + paths(256) + ")", want: "json.filter: the result could hold more than"},
		"json.patch at it":    {body: wide("a", 128, 682, 1) + "\n\ty := json.patch(a, " + adds(128) + ")"},
		"json.patch past it":  {body: wide("a", 128, 683, 1) + "\n\ty := json.patch(a, " + adds(128) + ")", want: "json.patch: the result could hold up to 262272 values"},
		"json.patch of many paths": {
			body: wide("a", 5000, 5000, 1) + "\n\ty := json.patch(a, " + adds(5000) + ")", want: "json.patch: the result could hold up to",
		},
		"regex.find_all_string_submatch_n at it": {body: `y := regex.find_all_string_submatch_n(input.object.groups62, input.object.a4095, -1)`},
		"regex.find_all_string_submatch_n past it": {
			body: `y := regex.find_all_string_submatch_n(input.object.groups62, input.object.a4096, -1)`,
			want: "regex.find_all_string_submatch_n: the result would hold 262208 values, above the sandbox's limit of 262144",
		},
	}
	e, _ := NewEngine(BuiltinNamesOrDie(t))
	// Not a test of the time limit: a loaded machine must not fail the
	// calls at the limit, which build megabytes.
	e.SetLimits(Limits{PolicyTimeout: time.Minute, TotalTimeout: time.Minute})
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := "package bounds\n\ndeny contains \"called\" if {\n\t" + tc.body + "\n\tcount(y) >= 0\n}\n"
			p, err := Compile(Source{Name: "bounds", Rego: src, Action: Deny})
			if err != nil {
				t.Fatal(err)
			}
			e.SetPolicy(p)
			input := Input{Operation: "CREATE", Object: in}
			// The input converted once, outside what is measured.
			if _, err := baseInput(input); err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			d, err := e.Evaluate(context.Background(), input)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if tc.want == "" {
				if err != nil || len(d.Denied) != 1 || d.Denied[0].Message != "called" {
					t.Fatalf("denied %v, error %v: want the call made", d.Denied, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			// Generous: the refusal itself takes milliseconds and a few
			// megabytes; unbounded, these took seconds and gigabytes.
			if took > 2*time.Second {
				t.Errorf("refused after %v, want at once", took)
			}
			if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 256<<20 {
				t.Errorf("allocated %d MiB before refusing, want a few", allocated>>20)
			}
		})
	}
}

// terms are args as a builtin's operands.
func terms(args []ast.Value) []*ast.Term {
	operands := make([]*ast.Term, len(args))
	for i, a := range args {
		operands[i] = ast.NewTerm(a)
	}
	return operands
}

// callBuiltin calls the builtin name, bounded, as an evaluation does.
func callBuiltin(name string, args ...ast.Value) (ast.Value, error) {
	operands := terms(args)
	var out ast.Value
	err := topdown.GetBuiltin(name)(topdown.BuiltinContext{Context: context.Background()}, operands, func(t *ast.Term) error {
		out = t.Value
		return nil
	})
	return out, err
}

// valuesForSizes are values to write: the strings each encoding escapes,
// and the shapes each writer indents.
func valuesForSizes(t *testing.T) []ast.Value {
	t.Helper()
	strs := []string{
		"", "plain", "it's \"quoted\" \\ back", "<tag>&amp;", "line1\nline2\n", "tab\there\r\n",
		"\x00\x1f\x7f\x1b", "héllo wörld", "日本語", "\u2028\u2029\u0085", "\xff\xfe invalid", "\U0001F600 emoji",
		"\ufeff bom", "\ufeff\U0001F600\u00e9", "\u00ad\u200b\u0080\ue000\uffff", "  padded  ", "- dash", "yes", "null", "123", "1e5", ": colon", "# hash", "{a: b}",
		strings.Repeat("long line with words ", 20), strings.Repeat("many\nshort\nlines\n", 20),
	}
	var vs []ast.Value
	var terms []*ast.Term
	for _, s := range strs {
		vs = append(vs, ast.String(s))
		terms = append(terms, ast.StringTerm(s))
	}
	for _, n := range []string{"0", "-1", "1.5", "1e300", "12345678901234567890123", "-0.000001"} {
		vs = append(vs, ast.Number(n))
		terms = append(terms, ast.NumberTerm(json.Number(n)))
	}
	vs = append(vs, ast.Boolean(true), ast.Null{}, ast.NewArray(), ast.NewObject(), ast.NewSet())
	obj := ast.NewObject()
	for i, t := range terms {
		obj.Insert(ast.StringTerm(fmt.Sprint("key ", strs[i%len(strs)], i)), t)
	}
	nested := ast.Value(ast.NewArray(terms...))
	for i := range 30 {
		nested = ast.NewObject([2]*ast.Term{ast.StringTerm(fmt.Sprint("level\n", i)), ast.NewTerm(nested)}, [2]*ast.Term{ast.StringTerm("s"), ast.StringTerm(strs[i%len(strs)])})
	}
	jobSet, err := ast.InterfaceToValue(admitted(t, "inplace-story2.yaml", nil))
	if err != nil {
		t.Fatal(err)
	}
	return append(vs, ast.NewArray(terms...), ast.NewSet(terms...), obj, nested, jobSet,
		ast.NewArray(ast.NewTerm(ast.NewArray()), ast.NewTerm(ast.NewObject()), ast.NewTerm(ast.NewArray(ast.NewTerm(ast.NewArray(ast.IntNumberTerm(1)))))),
	)
}

// TestSizesBoundTheResults: what a bound computes is never less than what
// the builtin builds, and equal to it where the bound says it is exact.
func TestSizesBoundTheResults(t *testing.T) {
	type call struct {
		name string
		args []ast.Value
	}
	var calls []call
	s := func(s string) ast.Value { return ast.String(s) }
	for _, v := range valuesForSizes(t) {
		calls = append(calls,
			call{"json.marshal", []ast.Value{v}},
			call{"yaml.marshal", []ast.Value{v}},
			call{"sprintf", []ast.Value{s("%v"), ast.NewArray(ast.NewTerm(v))}},
			call{"sprintf", []ast.Value{s("%#v|%q|% #x|%-20s|%.3s"), ast.NewArray(ast.NewTerm(v), ast.NewTerm(v), ast.NewTerm(v), ast.NewTerm(v), ast.NewTerm(v))}},
			call{"internal.template_string", []ast.Value{ast.NewArray(ast.StringTerm("<"), ast.SetTerm(ast.NewTerm(v)), ast.StringTerm(">"))}},
		)
		for _, opts := range []string{`{}`, `{"pretty": true}`, `{"indent": "  "}`, `{"prefix": "> ", "indent": "\t\t"}`, `{"prefix": "#", "pretty": false}`} {
			calls = append(calls, call{"json.marshal_with_options", []ast.Value{v, ast.MustParseTerm(opts).Value}})
		}
	}
	// Keys that are not strings: json.marshal counts them at most.
	calls = append(calls, call{"json.marshal", []ast.Value{ast.MustParseTerm(`{1: "a", [1, "<"]: "b", {"x": null}: "c", "d": {2: 3}}`).Value}})
	for _, f := range []string{"%s", "%d %d", "%[2]s %[1]s %[2]q", "%*d", "%.*f", "%9d|%-9x|%09.3f", "%%", "%!", "%z", "%[3]d", "%[x]d", "%[1]", "%", "%d", "%b %o %O %x %X %e %E %g %G %c %U %#U %t %v"} {
		calls = append(calls, call{"sprintf", []ast.Value{s(f), ast.MustParseTerm(`[12, 3.25, "str", 123456789012345678901234567890, ["a", {"b": 1}], 7]`).Value}})
	}
	for _, c := range [][3]string{{"aaa", "a", "bb"}, {"héllo", "", "-"}, {"", "", "x"}, {"abab", "ab", ""}, {"aaaa", "aa", "b"}, {"xyz", "q", "r"}} {
		calls = append(calls,
			call{"replace", []ast.Value{s(c[0]), s(c[1]), s(c[2])}},
			call{"strings.replace_n", []ast.Value{ast.NewObject([2]*ast.Term{ast.StringTerm(c[1]), ast.StringTerm(c[2])}, [2]*ast.Term{ast.StringTerm("b"), ast.StringTerm("BBB")}), s(c[0])}},
			call{"regex.replace", []ast.Value{s(c[0]), s(c[1]), s(c[2])}},
			call{"regex.replace", []ast.Value{s(c[0]), s("(a)(b)?"), s("[$1$2${1}$$]")}},
			call{"concat", []ast.Value{s(c[2]), ast.NewArray(ast.StringTerm(c[0]), ast.StringTerm(c[1]), ast.StringTerm(c[2]))}},
			call{"urlquery.encode_object", []ast.Value{ast.NewObject([2]*ast.Term{ast.StringTerm(c[0] + " &="), ast.ArrayTerm(ast.StringTerm(c[1]), ast.StringTerm(c[2]+"/?"))}, [2]*ast.Term{ast.StringTerm("k"), ast.StringTerm(c[0])})}},
		)
	}
	// Past the quick bound but within the limit: counted, and exact.
	many := strings.Repeat("a", 3000) + strings.Repeat("b", 100_000)
	calls = append(calls,
		call{"replace", []ast.Value{s(many), s("a"), s(strings.Repeat("x", 1000))}},
		call{"strings.replace_n", []ast.Value{ast.MustParseTerm(`{"a": "` + strings.Repeat("x", 1000) + `", "bb": ""}`).Value, s(many)}},
		call{"regex.replace", []ast.Value{s(many), s("a+|(b)"), s(strings.Repeat("$1", 500))}},
	)
	for _, c := range calls {
		operands := terms(c.args)
		size := boundedBuiltins[c.name](operands)
		out, err := callBuiltin(c.name, c.args...)
		if err != nil {
			continue // refused by the builtin itself, as some formats and options are
		}
		got := len(out.(ast.String))
		if size.bytes < got || size.exact && size.bytes != got {
			t.Errorf("%s(%.200v): the bound says %d bytes (exact %v), the result is %d", c.name, c.args, size.bytes, size.exact, got)
		}
	}
}

// TestSizesOfAJobSetAreClose: the bounds refuse no JobSet the apiserver
// stores: writing one takes no more than twice what it does.
func TestSizesOfAJobSetAreClose(t *testing.T) {
	v, err := ast.InterfaceToValue(admitted(t, "inplace-story2.yaml", nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"json.marshal", "yaml.marshal", "sprintf"} {
		args := []ast.Value{v}
		if name == "sprintf" {
			args = []ast.Value{ast.String("%v"), ast.NewArray(ast.NewTerm(v))}
		}
		operands := terms(args)
		out, err := callBuiltin(name, args...)
		if err != nil {
			t.Fatal(err)
		}
		if bound, got := boundedBuiltins[name](operands).bytes, len(out.(ast.String)); bound > 2*got {
			t.Errorf("%s of a JobSet: %d bytes, bounded at %d", name, got, bound)
		}
	}
}

// TestSizesOfCollectionsAreExact: where a collection's size is exact, it
// is the number of values the builtin builds.
func TestSizesOfCollectionsAreExact(t *testing.T) {
	cases := []struct {
		name string
		args []ast.Value
		// values counts the values of the result the builtin built.
		values func(ast.Value) int
	}{
		{"array.concat", []ast.Value{ast.MustParseTerm(`[1, 2, 3]`).Value, ast.MustParseTerm(`[[4], 5]`).Value}, width},
		{"regex.find_all_string_submatch_n", []ast.Value{ast.String("(a)(b)?|(x)"), ast.String("ab a x abx"), ast.Number("-1")}, submatches},
		{"regex.find_all_string_submatch_n", []ast.Value{ast.String("(a*)"), ast.String(strings.Repeat("ba", 20_000)), ast.Number("-1")}, submatches},
		{"regex.find_all_string_submatch_n", []ast.Value{ast.String("(a*)"), ast.String(strings.Repeat("ba", 20_000)), ast.Number("1000")}, submatches},
	}
	for _, c := range cases {
		operands := terms(c.args)
		size := boundedBuiltins[c.name](operands)
		out, err := callBuiltin(c.name, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.values(out); size.values < got || size.exact && size.values != got {
			t.Errorf("%s: the bound says %d values (exact %v), the result holds %d", c.name, size.values, size.exact, got)
		}
	}
}

// submatches counts the matches, and their groups, of a
// regex.find_all_string_submatch_n.
func submatches(v ast.Value) int {
	n := 0
	v.(*ast.Array).Foreach(func(t *ast.Term) { n += 1 + width(t.Value) })
	return n
}

// TestSizesBoundRandomValues writes random values of the characters the
// writers treat apart, at random depths, and holds each bound to what
// is written.
func TestSizesBoundRandomValues(t *testing.T) {
	pieces := []string{"a", "Z", "0", " ", "  ", "\n", "\r", "\t", "'", "\"", "\\", ":", ": ", "#", " #", "-", "- ", "?", "{", "}", "[", "]", ",", "&", "*", "!", "|", ">", "%", "@", "`", "<", "~",
		"\x00", "\x1b", "\x7f", "é", "日", "\U0001F600", "\u0085", "\u2028", "\u00a0", "\ufeff", "\ufffd", "\xff", "yes", "null", "1", "1.5", "0x1F", ".inf", "---", "..."}
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	var value func(depth int) *ast.Term
	value = func(depth int) *ast.Term {
		switch k := rng.IntN(10); {
		case depth > 4 || k < 4:
			return ast.StringTerm(str())
		case k == 4:
			return ast.NumberTerm(json.Number([]string{"0", "-7", "2.5", "1e21", "123456789012345678901"}[rng.IntN(5)]))
		case k == 5:
			return ast.BooleanTerm(rng.IntN(2) == 0)
		case k < 8:
			var items []*ast.Term
			for range rng.IntN(4) {
				items = append(items, value(depth+1))
			}
			return ast.ArrayTerm(items...)
		default:
			obj := ast.NewObject()
			for range rng.IntN(4) {
				obj.Insert(ast.StringTerm(str()), value(depth+1))
			}
			return ast.NewTerm(obj)
		}
	}
	for range 3000 {
		v := value(0)
		for name, args := range map[string][]*ast.Term{
			"json.marshal": {v},
			"yaml.marshal": {v},
			"sprintf":      {ast.StringTerm("%v|%q|%s"), ast.ArrayTerm(v, v, v)},
		} {
			vs := make([]ast.Value, len(args))
			for i, t := range args {
				vs[i] = t.Value
			}
			out, err := callBuiltin(name, vs...)
			if err != nil {
				continue // refused by the builtin itself (YAML has no way to write \x7f)
			}
			if bound, got := boundedBuiltins[name](args).bytes, len(out.(ast.String)); bound < got {
				t.Errorf("%s(%v): bound %d, written %d: %q", name, v, bound, got, out)
			}
		}
	}
}
