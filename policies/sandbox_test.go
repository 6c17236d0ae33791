package policies

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/types"
)

// A builtin registered for this test binary only, and on neither list:
// what a builtin a newer OPA adds looks like before anyone reviews it.
func init() {
	rego.RegisterBuiltin1(&rego.Function{Name: "inplace_test.unreviewed", Decl: types.NewFunction(types.Args(types.A), types.B)},
		func(rego.BuiltinContext, *ast.Term) (*ast.Term, error) { return ast.BooleanTerm(true), nil })
}

// TestSandboxRefusesEachDeniedBuiltin compiles a policy per refused
// builtin the way an admin writes it, hostile ones included, and requires
// an error that names the builtin, its line and why.
func TestSandboxRefusesEachDeniedBuiltin(t *testing.T) {
	cases := map[string]struct {
		call string
		why  string
	}{
		"http.send":          {`http.send({"method": "get", "url": "http://127.0.0.1/"})`, "reaches the network"},
		"net.lookup_ip_addr": {`net.lookup_ip_addr("kubernetes.default")`, "reaches the network"},
		"opa.runtime":        {`opa.runtime()`, "environment"},
		// What a $ref to a file made of the manager: its content in the
		// denial message, or its memory exhausted by /dev/zero.
		"json.match_schema":  {`json.match_schema({}, {"$ref": "file:///dev/zero"})`, "$ref"},
		"json.verify_schema": {`json.verify_schema({"$ref": "file:///etc/passwd"})`, "$ref"},
		"time.now_ns":        {`time.now_ns()`, "differs between replicas"},
		"rand.intn":          {`rand.intn("x", 10)`, "differs between replicas"},
		"uuid.rfc4122":       {`uuid.rfc4122("x")`, "differs between replicas"},
		"io.jwt.encode_sign": {`io.jwt.encode_sign({"alg": "HS256"}, {}, {"kty": "oct", "k": "AA"})`, "signatures are random"},
		// Hostile: each is one call OPA cannot cancel, and each, allowed,
		// would hold a request far past its time limit or end the manager.
		"strings.render_template":   {`strings.render_template("{{range 50000000000}}{{end}}", {})`, "loops as long as it says"},
		"graph.reachable_paths":     {`graph.reachable_paths({"a": ["b", "c"], "b": ["a", "c"], "c": ["a", "b"]}, ["a"])`, "exponentially many"},
		"bits.lsh":                  {`bits.lsh(1, 200000000)`, "allocates without bound"},
		"graphql.parse_query":       {`graphql.parse_query("{a{a{a{a}}}}")`, "overflows the Go stack"},
		"glob.match":                {`glob.match("*a*a*a*a*a*a*b*", [], input.object.metadata.name)`, "fatal error"},
		"regex.globs_match":         {`regex.globs_match(".*a.*a.*a.*a.*a.*a.*b.*", input.object.metadata.name)`, "backtracking"},
		"io.jwt.verify_rs256":       {`io.jwt.verify_rs256(input.object.metadata.name, input.parameters.key)`, "square of the key's size"},
		"crypto.x509.parse_keypair": {`crypto.x509.parse_keypair(input.parameters.cert, input.parameters.key)`, "private keys"},
		"net.cidr_contains_matches": {`net.cidr_contains_matches(input.parameters.cidrs, input.parameters.addresses)`, "faster than their product"},
		// The clock and the manager's time zone.
		"crypto.x509.parse_and_verify_certificates": {`crypto.x509.parse_and_verify_certificates(input.parameters.chain)`, "current time"},
		"io.jwt.decode_verify":                      {`io.jwt.decode_verify(input.parameters.token, {"secret": "s"})`, "reads the clock"},
		"time.date":                                 {`time.date([0, "Local"])`, `"Local", the manager's own`},
		"time.format":                               {`time.format([0, "Local", "MST"])`, `"Local", the manager's own`},
		"time.parse_ns":                             {`time.parse_ns("RFC1123", "Mon, 02 Jan 2006 15:04:05 CET")`, "zone abbreviation"},
		// Not reviewed: what the next OPA's new builtin gets.
		"inplace_test.unreviewed": {`inplace_test.unreviewed(1)`, "nobody has reviewed it"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := "package p\n\ndeny contains msg if {\n\tx := " + tc.call + "\n\tmsg := sprintf(\"%v\", [x])\n}\n"
			_, err := Compile(Source{Name: "bad", Rego: src, Action: Deny})
			for _, want := range []string{
				"bad.rego:4: " + name + " is not allowed in a policy: ",
				tc.why,
				name + " is not on the sandbox's list of allowed builtins",
			} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v, want one containing %q", err, want)
				}
			}
		})
	}
}

// TestSandboxAllowsTheReviewedBuiltins compiles and evaluates a call of
// each family a policy may use, the ones near a refused one included.
func TestSandboxAllowsTheReviewedBuiltins(t *testing.T) {
	calls := map[string]string{
		"bits.rsh":               `bits.rsh(1024, 3) == 128`,
		"bits.and":               `bits.and(6, 3) == 2`,
		"time.parse_rfc3339_ns":  `time.parse_rfc3339_ns("1970-01-01T00:00:01+01:00") == -3599000000000`,
		"time.parse_duration_ns": `time.parse_duration_ns("1m") == 60000000000`,
		"yaml.unmarshal":         `yaml.unmarshal("a: [1, 2]") == {"a": [1, 2]}`,
		"regex.match":            `regex.match("^[a-z]+$", "abc")`,
		"glob.quote_meta":        `glob.quote_meta("*.x") == "\\*.x"`,
		"graph.reachable":        `graph.reachable({"a": ["b"], "b": []}, ["a"]) == {"a", "b"}`,
		"units.parse_bytes":      `units.parse_bytes("1Ki") == 1024`,
		"semver.compare":         `semver.compare("1.2.3", "1.10.0") == -1`,
		"net.cidr_contains":      `net.cidr_contains("10.0.0.0/8", "10.1.2.3")`,
		"crypto.sha256":          `crypto.sha256("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"`,
		// Erased by the sandbox's compiler, which enables no print
		// statements; trace is a no-op without a tracer.
		"print": `print("x")`,
		"trace": `trace("x")`,
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			src := "package p\n\ndeny contains \"called\" if {\n\t" + call + "\n}\n"
			p, err := Compile(Source{Name: "ok", Rego: src, Action: Deny})
			if err != nil {
				t.Fatal(err)
			}
			e, _ := NewEngine(BuiltinNamesOrDie(t))
			e.SetPolicy(p)
			d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: map[string]any{}})
			if err != nil || len(d.Denied) != 1 || d.Denied[0].Message != "called" {
				t.Errorf("denied %v, error %v: want the call to hold", d.Denied, err)
			}
		})
	}
}

// TestSandboxCompilerRefusesWithoutTheCheck holds the compiler itself to
// the sandbox: the check that explains a refusal is for people, and a
// policy that slipped past it must still not compile.
func TestSandboxCompilerRefusesWithoutTheCheck(t *testing.T) {
	for _, name := range []string{"http.send", "opa.runtime", "json.match_schema", "time.now_ns", "strings.render_template", "glob.match"} {
		b := ast.BuiltinMap[name]
		if b == nil {
			t.Fatalf("%s: not a builtin of this OPA", name)
		}
		for _, allowed := range sandboxCapabilities().Builtins {
			if allowed.Name == name {
				t.Errorf("%s is in the sandbox's capabilities", name)
			}
		}
	}
	m, err := ast.ParseModuleWithOpts("x.rego", "package p\n\nr := http.send({})\n", ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		t.Fatal(err)
	}
	c := newCompiler(ast.RegoV1)
	c.Compile(map[string]*ast.Module{"x.rego": m})
	if !c.Failed() || !strings.Contains(c.Errors.Error(), "undefined function http.send") {
		t.Errorf("compiler errors %v, want http.send undefined", c.Errors)
	}
	if len(sandboxCapabilities().AllowNet) != 0 || sandboxCapabilities().AllowNet == nil {
		t.Errorf("allow_net %v: want empty and not nil (nil allows every host)", sandboxCapabilities().AllowNet)
	}
}

// TestEveryBuiltinIsReviewed: every builtin of this OPA is on the
// allowed list or on the refused one, so that an upgrade that adds a
// builtin fails here until someone reviews it and puts it on one.
func TestEveryBuiltinIsReviewed(t *testing.T) {
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		if strings.HasPrefix(b.Name, "inplace_test.") {
			continue // registered by these tests
		}
		_, refused := refusedBuiltins[b.Name]
		switch {
		case allowedBuiltins[b.Name] && refused:
			t.Errorf("%s is both allowed and refused: keep it on one list", b.Name)
		case !allowedBuiltins[b.Name] && !refused:
			t.Errorf("%s is a builtin of this OPA nobody has reviewed: put it on allowedBuiltins, with the family whose bound it shares, or on refusedBuiltins with why", b.Name)
		case b.IsNondeterministic() && !refused:
			t.Errorf("%s is nondeterministic and not refused", b.Name)
		}
	}
	for name := range allowedBuiltins {
		if ast.BuiltinMap[name] == nil {
			t.Errorf("%s is allowed but not a builtin of this OPA: drop it or fix the name", name)
		}
	}
	for name := range refusedBuiltins {
		if ast.BuiltinMap[name] == nil {
			t.Errorf("%s is refused but not a builtin of this OPA: drop it or fix the name", name)
		}
	}
}

// TestSandboxCapabilitiesAreTheAllowedBuiltins: the compiler knows the
// allowed builtins, and those only.
func TestSandboxCapabilitiesAreTheAllowedBuiltins(t *testing.T) {
	var want []string
	for name := range allowedBuiltins {
		want = append(want, name)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, AllowedBuiltins()); diff != "" {
		t.Errorf("capabilities (-allowed +compiled with):\n%s", diff)
	}
	for _, name := range DeniedBuiltins() {
		if slices.Contains(AllowedBuiltins(), name) {
			t.Errorf("%s is both allowed and denied", name)
		}
	}
}

// TestPolicyTestsCompileAsProduction: `inplacectl policy test` passes only
// what the manager would compile.
func TestPolicyTestsCompileAsProduction(t *testing.T) {
	cases := map[string]struct {
		policy string
		want   string
	}{
		"a denied builtin": {
			policy: "package p\n\ndeny contains msg if {\n\tmsg := sprintf(\"%d\", [time.now_ns()])\n}\n",
			want:   "p.rego:4: time.now_ns is not allowed",
		},
		"strict mode": {
			policy: "package p\n\ndeny contains \"x\" if {\n\tunused := 1\n\ttrue\n}\n",
			want:   "p.rego:4",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{
				"p.rego":      {Data: []byte(tc.policy)},
				"p_test.rego": {Data: []byte("package p_test\n\nimport data.p\n\ntest_denies if {\n\tcount(p.deny) > 0\n}\n")},
			}
			_, err := RunRegoTests(context.Background(), fsys)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestSecurityDocListsTheBuiltins keeps docs/explanation/security.md
// true: it names every builtin, allowed or refused.
func TestSecurityDocListsTheBuiltins(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "explanation", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Concat(AllowedBuiltins(), slices.Collect(maps.Keys(refusedBuiltins))) {
		if strings.HasPrefix(name, "inplace_test.") {
			continue
		}
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/explanation/security.md does not list the builtin `%s`", name)
		}
	}
}
