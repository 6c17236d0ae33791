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
// replica or on a retry of the same request; and nothing whose time or
// memory its arguments do not bound, for one call that runs away takes the
// whole admission path with it.

// allowedBuiltins are the only builtins a policy may call. Each was
// reviewed for three things: its answer depends on its arguments alone
// (no network, files, environment, clock, time zone or randomness); its
// time and memory are bounded by its arguments' size, or it checks OPA's
// cancellation as it goes so that the policy's time limit stops it, or
// a wrapper refuses a call whose result would be larger than one call may
// build (bounds.go); and it cannot crash the manager (a Go stack overflow
// or a failed allocation is a fatal error that no recover catches). A
// builtin a newer OPA adds is refused until someone reviews it:
// TestEveryBuiltinIsReviewed fails until it is on this list or on
// refusedBuiltins.
var allowedBuiltins = setOf(
	// Unification, comparison and membership (`in`): linear in the values
	// compared.
	"assign", "eq", "equal", "neq", "lt", "lte", "gt", "gte",
	"internal.member_2", "internal.member_3",
	// Arithmetic: a result no larger than its operands together, computed
	// in time polynomial in their size. Repeated squaring grows a number
	// step by step, and OPA checks cancellation between steps.
	"plus", "minus", "mul", "div", "rem", "abs", "ceil", "floor", "round",
	// Number ranges: as long as the numbers say, not their digits, but OPA
	// checks cancellation at each number, so the time limit stops them.
	"numbers.range", "numbers.range_step",
	// Bits, except the left shift: a result no larger than the operands.
	"bits.and", "bits.or", "bits.xor", "bits.negate", "bits.rsh",
	// Aggregates: linear, sort n log n, in the collection.
	"count", "sum", "product", "max", "min", "sort",
	// Sets, arrays and objects: linear in the collections (walk yields one
	// path at a time, and OPA checks cancellation between them). Bounded
	// per call: array.concat, which doubles an array a call; object.union
	// and object.union_n, which copy objects whose parts may be shared;
	// json.filter, json.remove and json.patch, which go through the items
	// of every node on every path, the paths times the widths.
	"and", "or", "intersection", "union",
	"array.concat", "array.flatten", "array.reverse", "array.slice",
	"object.filter", "object.get", "object.keys", "object.remove", "object.subset", "object.union", "object.union_n",
	"json.filter", "json.remove", "json.patch", "walk",
	// Types and conversions: constant, or linear in the value.
	"is_array", "is_boolean", "is_null", "is_number", "is_object", "is_set", "is_string", "type_name", "to_number",
	// Strings: linear in their arguments. Bounded per call: replace,
	// strings.replace_n and concat, whose results are products of their
	// arguments' lengths; sprintf, whose widths reach ten million a
	// directive and whose %v writes a value with shared parts once per
	// path; internal.template_string, which writes values the same way.
	"concat", "contains", "endswith", "startswith", "format_int", "indexof", "indexof_n",
	"lower", "upper", "replace", "split", "sprintf", "substring",
	"trim", "trim_left", "trim_prefix", "trim_right", "trim_space", "trim_suffix",
	"strings.any_prefix_match", "strings.any_suffix_match", "strings.count", "strings.replace_n",
	"strings.reverse", "strings.split_n", "internal.template_string",
	// Regular expressions: RE2, linear in the input, compiled patterns kept
	// in OPA's cache of 100. Bounded per call: regex.replace and
	// regex.find_all_string_submatch_n, whose results are the matches
	// times the replacement or the groups.
	"regex.find_all_string_submatch_n", "regex.find_n", "regex.is_valid", "regex.match",
	"regex.replace", "regex.split", "regex.template_match", "glob.quote_meta",
	// Encodings: linear in their input. encoding/json refuses nesting
	// deeper than 10,000; the YAML decoder refuses excessive aliasing (a
	// billion laughs fails at once) and nesting deeper than 10,000.
	// Bounded per call: json.marshal, json.marshal_with_options and
	// yaml.marshal, which write a value with shared parts once per path
	// (and YAML indents each line by its depth), and
	// urlquery.encode_object, which writes a key once per value.
	"base64.decode", "base64.encode", "base64.is_valid", "base64url.decode", "base64url.encode", "base64url.encode_no_pad",
	"hex.decode", "hex.encode",
	"json.is_valid", "json.marshal", "json.marshal_with_options", "json.unmarshal",
	"yaml.is_valid", "yaml.marshal", "yaml.unmarshal",
	"urlquery.decode", "urlquery.decode_object", "urlquery.encode", "urlquery.encode_object",
	"uri.is_valid", "uri.parse", "uuid.parse",
	// Hashes, HMACs, and signatures on fixed-size keys (HMAC, ECDSA on
	// named curves, Ed25519): linear in the message. Certificates are
	// parsed, not verified: no clock.
	"crypto.md5", "crypto.sha1", "crypto.sha256",
	"crypto.hmac.equal", "crypto.hmac.md5", "crypto.hmac.sha1", "crypto.hmac.sha256", "crypto.hmac.sha512",
	"crypto.x509.parse_certificates", "crypto.x509.parse_certificate_request",
	"io.jwt.decode", "io.jwt.verify_hs256", "io.jwt.verify_hs384", "io.jwt.verify_hs512",
	"io.jwt.verify_es256", "io.jwt.verify_es384", "io.jwt.verify_es512", "io.jwt.verify_eddsa",
	// Addresses as values, never looked up: linear in the CIDRs;
	// cidr_expand checks cancellation at each address.
	"net.cidr_contains", "net.cidr_expand", "net.cidr_intersects",
	"net.cidr_is_valid", "net.cidr_merge",
	// Quantities and versions: parsed in time linear in the string.
	"units.parse", "units.parse_bytes", "semver.compare", "semver.is_valid",
	// Time from the arguments alone, without a time zone: RFC 3339 carries
	// a numeric offset, a duration has none.
	"time.parse_rfc3339_ns", "time.parse_duration_ns",
	// Graphs: reachable is a breadth-first walk, linear in the graph.
	"graph.reachable",
	// The policy's own annotations.
	"rego.metadata.chain", "rego.metadata.rule",
	// Debugging: the sandbox's compiler erases print (it never enables
	// print statements), and the manager attaches no tracer, so trace
	// does nothing; internal.test_case names a case of a parameterized
	// Rego test.
	"print", "internal.print", "trace", "internal.test_case",
	// Deprecated names of builtins above, for a policy in Rego v0
	// (Gatekeeper's library); strict mode refuses them in Rego v1.
	"all", "any", "re_match", "set_diff", "net.cidr_overlap",
	"cast_array", "cast_boolean", "cast_null", "cast_object", "cast_set", "cast_string",
)

// Reasons shared by several refused builtins.
const (
	differsBetweenReplicas = "its answer differs between replicas and retries of the same request"
	stackOverflow          = "a deeply nested query or schema overflows the Go stack, a fatal error that no recover catches"
	localTimeZone          = `its time zone may be "Local", the manager's own, which its answer would reveal and depend on`
	privateKeys            = "it validates private keys at a cost that grows with a power of the key's size, which the policy chooses; no JobSet carries a private key"
	rsaVerification        = "RSA verification costs the square of the key's size, which the policy chooses: a 32 KB key takes a second, uninterrupted"
)

// refusedBuiltins are the builtins of this OPA that were reviewed and
// kept out of the sandbox, each with why. The compiler would refuse them
// anyway, not being on allowedBuiltins; the reason is for the author of a
// policy that calls one, so that they look for another way rather than
// for a typo.
var refusedBuiltins = map[string]string{
	"http.send":              "it reaches the network",
	"net.lookup_ip_addr":     "it reaches the network (DNS)",
	"providers.aws.sign_req": "it signs requests for a network no policy may reach",
	"opa.runtime":            "it reveals the manager's environment and configuration",
	// gojsonschema resolves a schema's $ref to any URL, file:// included,
	// and OPA has no switch to turn that off: a $ref would read the
	// manager's files into a denial message.
	"json.match_schema":                         "it resolves a schema's $ref to any URL or file",
	"json.verify_schema":                        "it resolves a schema's $ref to any URL or file",
	"time.now_ns":                               differsBetweenReplicas,
	"rand.intn":                                 differsBetweenReplicas,
	"uuid.rfc4122":                              differsBetweenReplicas,
	"io.jwt.decode_verify":                      "it reads the clock to check a token's exp and nbf, so " + differsBetweenReplicas,
	"io.jwt.encode_sign":                        "its signatures are random (ECDSA, RSA-PSS), so " + differsBetweenReplicas,
	"io.jwt.encode_sign_raw":                    "its signatures are random (ECDSA, RSA-PSS), so " + differsBetweenReplicas,
	"crypto.x509.parse_and_verify_certificates": "its answer depends on the current time: certificates expire",
	"crypto.x509.parse_and_verify_certificates_with_options": "its answer depends on the current time: certificates expire",
	// The Local time zone is the manager's: time.date([0, "Local"])
	// tells a policy where the manager runs, and two replicas in two
	// time zones answer the same request differently.
	"time.date":     localTimeZone,
	"time.clock":    localTimeZone,
	"time.weekday":  localTimeZone,
	"time.add_date": localTimeZone,
	"time.diff":     localTimeZone,
	"time.format":   localTimeZone,
	// Go's time.Parse gives a zone abbreviation the offset it has in the
	// Local time zone, if it has one there.
	"time.parse_ns": "it reads a zone abbreviation (MST, CET) with the offset it has in the manager's own time zone",
	// One call, no cancellation inside: the time limit cannot stop them.
	"strings.render_template":           "its template loops as long as it says ({{range 50000000000}}) and writes output without bound, in one uninterruptible call",
	"graph.reachable_paths":             "it enumerates every path, exponentially many in the graph's size, in one uninterruptible call",
	"bits.lsh":                          "a shift by a large count allocates without bound in one call: bits.lsh(1, 200000000) is 25 MB, then minutes to print in decimal",
	"glob.match":                        "its matcher allocates a power of the input's length, the pattern's wildcards the exponent: *a*a*a*a*a*a*b* against 100 characters asks for 4 GB at once, a fatal error",
	"regex.globs_match":                 "it intersects two patterns by backtracking, exponential in their wildcards: .*a.*a.*a.*a.*a.*a.*b.* against 60 characters takes seconds, uninterrupted",
	"graphql.is_valid":                  stackOverflow,
	"graphql.parse":                     stackOverflow,
	"graphql.parse_and_verify":          stackOverflow,
	"graphql.parse_query":               stackOverflow,
	"graphql.parse_schema":              stackOverflow,
	"graphql.schema_is_valid":           stackOverflow,
	"io.jwt.verify_rs256":               rsaVerification,
	"io.jwt.verify_rs384":               rsaVerification,
	"io.jwt.verify_rs512":               rsaVerification,
	"io.jwt.verify_ps256":               rsaVerification,
	"io.jwt.verify_ps384":               rsaVerification,
	"io.jwt.verify_ps512":               rsaVerification,
	"crypto.parse_private_keys":         privateKeys,
	"crypto.x509.parse_rsa_private_key": privateKeys,
	"crypto.x509.parse_keypair":         privateKeys,
	"rego.parse_module":                 "it parses Rego into a syntax tree many times the source's size, which no JobSet policy needs",
	// Each match goes into one set, whose members' hashes collide
	// ([i, j] hashes as i + j): 100 addresses against 100 CIDRs take a
	// second, 300 against 300 two minutes, in one call.
	"net.cidr_contains_matches": "it tests every address against every CIDR and adds the matches to one set, in time that grows faster than their product, in one uninterruptible call: 300 against 300 take two minutes; net.cidr_contains in a comprehension does the same within the time limit",
}

func setOf(names ...string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// sandboxCapabilities returns the capabilities every policy is compiled
// with: the allowed builtins of this OPA and no host to reach (allow_net
// empty, not nil: nil would allow all). Made once and shared, read-only,
// by every compiler: each compiled policy holds its compiler, and a copy
// each was a tenth of a policy's memory.
var sandboxCapabilities = sync.OnceValue(func() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	kept := make([]*ast.Builtin, 0, len(allowedBuiltins))
	for _, b := range caps.Builtins {
		if allowed(b) {
			kept = append(kept, b)
		}
	}
	caps.Builtins = kept
	caps.AllowNet = []string{}
	return caps
})

// allowed says whether a policy may call b. A builtin OPA marks
// nondeterministic never is, whatever the list says.
func allowed(b *ast.Builtin) bool {
	return allowedBuiltins[b.Name] && !b.IsNondeterministic()
}

// refusedBecause returns why no policy may call the builtin name, and
// false if a policy may, or if name is no builtin of this OPA (a
// function of the policy's own, or a typo the compiler reports).
func refusedBecause(name string) (string, bool) {
	b, ok := ast.BuiltinMap[name]
	if !ok || allowed(b) {
		return "", false
	}
	if why, ok := refusedBuiltins[name]; ok {
		return why, true
	}
	if b.IsNondeterministic() {
		return "OPA marks it nondeterministic", true
	}
	return "nobody has reviewed it for the sandbox yet", true
}

// AllowedBuiltins lists the builtins a policy may call, sorted.
func AllowedBuiltins() []string {
	var out []string
	for _, b := range sandboxCapabilities().Builtins {
		out = append(out, b.Name)
	}
	slices.Sort(out)
	return out
}

// DeniedBuiltins lists the builtins of this OPA no policy may call, sorted.
func DeniedBuiltins() []string {
	var out []string
	for name, b := range ast.BuiltinMap {
		if !allowed(b) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// checkSandbox returns an error for each call module makes to a builtin
// not on the allowed list, naming it, its line and why. The compiler
// would refuse the call too, as an undefined function; this says why, so
// that the author looks for another way rather than for a typo.
func checkSandbox(module *ast.Module) error {
	var errs []string
	report := func(name string, loc *ast.Location) {
		why, refused := refusedBecause(name)
		if !refused {
			return
		}
		where := module.Package.Location.File
		if loc != nil {
			where = fmt.Sprintf("%s:%d", loc.File, loc.Row)
		}
		errs = append(errs, fmt.Sprintf("%s: %s is not allowed in a policy: %s; %s is not on the sandbox's list of allowed builtins: policies run sandboxed, with no network, files, environment, clock or randomness, and only builtins whose time and memory their arguments bound (see docs/explanation/security.md)", where, name, why, name))
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
