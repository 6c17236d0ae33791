package policies

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/ast"
)

// TestSandboxRefusesEachDeniedBuiltin compiles a policy per denied
// builtin the way an admin writes it, and requires an error that names the
// builtin, its line and why.
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
		// Not listed by name: denied as OPA marks it nondeterministic.
		"io.jwt.encode_sign": {`io.jwt.encode_sign({"alg": "HS256"}, {}, {"kty": "oct", "k": "AA"})`, "differs between replicas"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := "package p\n\ndeny contains msg if {\n\tx := " + tc.call + "\n\tmsg := sprintf(\"%v\", [x])\n}\n"
			_, err := Compile(Source{Name: "bad", Rego: src, Action: Deny})
			want := "bad.rego:4: " + name + " is not allowed in a policy: "
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("error %v, want one containing %q and %q", err, want, tc.why)
			}
		})
	}
}

// TestSandboxCompilerRefusesWithoutTheCheck holds the compiler itself to
// the sandbox: the check that explains a refusal is for people, and a
// policy that slipped past it must still not compile.
func TestSandboxCompilerRefusesWithoutTheCheck(t *testing.T) {
	for _, name := range []string{"http.send", "opa.runtime", "json.match_schema", "time.now_ns"} {
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

// TestEveryNondeterministicBuiltinIsDenied keeps the list true as OPA
// grows: a builtin a newer OPA marks nondeterministic is denied with no
// edit here.
func TestEveryNondeterministicBuiltinIsDenied(t *testing.T) {
	denied := map[string]bool{}
	for _, n := range DeniedBuiltins() {
		denied[n] = true
	}
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		if b.IsNondeterministic() && !denied[b.Name] {
			t.Errorf("%s is nondeterministic and not denied", b.Name)
		}
	}
	for name := range deniedBuiltins {
		if ast.BuiltinMap[name] == nil {
			t.Errorf("%s is denied but not a builtin of this OPA: drop it or fix the name", name)
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

// TestSecurityDocListsTheDeniedBuiltins keeps docs/explanation/security.md true.
func TestSecurityDocListsTheDeniedBuiltins(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "explanation", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range DeniedBuiltins() {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/explanation/security.md does not list the denied builtin `%s`", name)
		}
	}
}
