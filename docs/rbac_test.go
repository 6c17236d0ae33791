package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// securityPage holds the RBAC tables: every right of every Role and
// ClusterRole that an install holds or the controller creates, and why.
const securityPage = "explanation/security.md"

// rbacInstalls are the kustomizations whose Roles and ClusterRoles the
// tables describe: with cert-manager, and without it (the admission
// server's right to write its own CA). config/agent-no-pod-fallback only
// takes patch from the agents' ClusterRole.
var rbacInstalls = []string{"../config/default", "../config/selfsigned"}

// rbacPackages are the trees whose code creates Roles at run time.
var rbacPackages = []string{"controller", "webhook", "policies", "agent", "cmd"}

// runtimeRoles names, by package directory and function, the Role that
// the PolicyRules a function builds go into.
var runtimeRoles = map[string]string{
	"controller.agentRules": "Role inplace-agent",
}

// namedAtRunTime stands for resource names the code computes (a
// JobSet's broadcast) and the docs write with a placeholder
// (`<jobset>-epochs`).
const namedAtRunTime = "<run time>"

// rbacHeader is the header of an RBAC table of securityPage.
var rbacHeader = []string{"role", "API group", "resources", "verbs", "why"}

// right is one verb on one resource (or non-resource URL, which begins
// with "/" and has no group), by name if the rule names one, granted by
// one Role or ClusterRole ("ClusterRole inplace-manager").
type right struct {
	role, group, resource, name, verb string
}

func (r right) String() string {
	s := fmt.Sprintf("%s: %s %s", r.role, r.verb, r.resource)
	if r.group != "" {
		s += "." + r.group
	}
	if r.name != "" {
		s += " named " + r.name
	}
	return s
}

// rightsOf expands a role's rules into its rights.
func rightsOf(role string, rules []rbacv1.PolicyRule) []right {
	var out []right
	for _, rule := range rules {
		for _, url := range rule.NonResourceURLs {
			for _, v := range rule.Verbs {
				out = append(out, right{role: role, resource: url, verb: v})
			}
		}
		names := rule.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					for _, n := range names {
						out = append(out, right{role, g, res, n, v})
					}
				}
			}
		}
	}
	return out
}

// installedRights renders rbacInstalls with kustomize and returns the
// rights of their Roles and ClusterRoles. A role of the same kind and
// name must grant the same in each.
func installedRights(t *testing.T) []right {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	seen := map[string][]rbacv1.PolicyRule{}
	for _, dir := range rbacInstalls {
		resources, err := k.Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		for _, res := range resources.Resources() {
			kind := res.GetKind()
			if kind != "Role" && kind != "ClusterRole" {
				continue
			}
			data, err := res.AsYAML()
			if err != nil {
				t.Fatal(err)
			}
			var role rbacv1.ClusterRole // a Role's fields are a subset
			if err := yaml.UnmarshalStrict(data, &role); err != nil {
				t.Fatalf("%s %s of %s: %v", kind, res.GetName(), dir, err)
			}
			if role.AggregationRule != nil {
				t.Fatalf("%s %s of %s aggregates other roles: the test does not follow them", kind, role.Name, dir)
			}
			key := kind + " " + role.Name
			if before, ok := seen[key]; ok {
				if !slices.EqualFunc(before, role.Rules, func(a, b rbacv1.PolicyRule) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
					t.Errorf("%s differs between %v", key, rbacInstalls)
				}
				continue
			}
			seen[key] = role.Rules
		}
	}
	var out []right
	for _, key := range slices.Sorted(maps.Keys(seen)) {
		out = append(out, rightsOf(key, seen[key])...)
	}
	return out
}

// runtimeRights reads, from the code of rbacPackages, the PolicyRules it
// writes into Roles at run time: composite literals of rbacv1.PolicyRule,
// alone or in a []rbacv1.PolicyRule, whose function runtimeRoles
// attributes to a Role. Resource names that are not string literals are
// namedAtRunTime.
func runtimeRights(t *testing.T) []right {
	t.Helper()
	var out []right
	for _, path := range goSources(t) {
		dir := filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, "../")))
		if !slices.ContainsFunc(rbacPackages, func(p string) bool { return dir == p || strings.HasPrefix(dir, p+"/") }) {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		rbac := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "k8s.io/api/rbac/v1" {
				rbac = "v1"
				if imp.Name != nil {
					rbac = imp.Name.Name
				}
			}
		}
		if rbac == "" {
			continue
		}
		isPolicyRule := func(e ast.Expr) bool {
			sel, ok := e.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "PolicyRule" {
				return false
			}
			x, ok := sel.X.(*ast.Ident)
			return ok && x.Name == rbac
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			var rules []*ast.CompositeLit
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				lit, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				if isPolicyRule(lit.Type) {
					rules = append(rules, lit)
					return false
				}
				if arr, ok := lit.Type.(*ast.ArrayType); ok && isPolicyRule(arr.Elt) {
					for _, e := range lit.Elts {
						if rule, ok := e.(*ast.CompositeLit); ok {
							rules = append(rules, rule)
						} else {
							t.Errorf("%s: a PolicyRule that is not a literal: the test cannot read it", fset.Position(e.Pos()))
						}
					}
					return false
				}
				return true
			})
			if len(rules) == 0 {
				continue
			}
			role, ok := runtimeRoles[dir+"."+fn.Name.Name]
			if !ok {
				t.Errorf("%s: %s builds RBAC rules of a Role the test does not know: name it in runtimeRoles, and its rights in docs/%s", fset.Position(fn.Pos()), fn.Name.Name, securityPage)
				continue
			}
			for _, lit := range rules {
				out = append(out, rightsOf(role, []rbacv1.PolicyRule{policyRule(t, fset, lit)})...)
			}
		}
	}
	return out
}

// policyRule reads a PolicyRule literal whose fields are string slice
// literals; ResourceNames may be any expression (namedAtRunTime).
func policyRule(t *testing.T, fset *token.FileSet, lit *ast.CompositeLit) rbacv1.PolicyRule {
	t.Helper()
	var rule rbacv1.PolicyRule
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		var key *ast.Ident
		if ok {
			key, ok = kv.Key.(*ast.Ident)
		}
		if !ok {
			t.Errorf("%s: a PolicyRule without field names: the test cannot read it", fset.Position(e.Pos()))
			continue
		}
		var strs []string
		list, isList := kv.Value.(*ast.CompositeLit)
		for i := 0; isList && i < len(list.Elts); i++ {
			b, ok := list.Elts[i].(*ast.BasicLit)
			if !ok || b.Kind != token.STRING {
				isList = false
				break
			}
			s, _ := strconv.Unquote(b.Value)
			strs = append(strs, s)
		}
		switch {
		case key.Name == "ResourceNames" && !isList:
			strs = []string{namedAtRunTime}
		case !isList:
			t.Errorf("%s: %s is not a list of string literals: the test cannot read it", fset.Position(kv.Value.Pos()), key.Name)
		}
		switch key.Name {
		case "APIGroups":
			rule.APIGroups = strs
		case "Resources":
			rule.Resources = strs
		case "Verbs":
			rule.Verbs = strs
		case "ResourceNames":
			rule.ResourceNames = strs
		case "NonResourceURLs":
			rule.NonResourceURLs = strs
		}
	}
	return rule
}

var (
	roleCell  = regexp.MustCompile("^(ClusterRole|Role) `([^`]+)`")
	codeInRow = regexp.MustCompile("`([^`]+)`")
	verbWord  = regexp.MustCompile(`^[a-z]+$`)
)

// documentedRights reads the RBAC tables of securityPage: those whose
// header is rbacHeader. A row reads
//
//	| ClusterRole `name` ... | `group`, or core | `resource`, ... [named `name`, ...] | verb, ... | why |
//
// and grants each verb on each resource (by each name); a resource that
// begins with "/" is a non-resource URL, whose group cell is left out
// ("—"). A name with a placeholder (`<jobset>-epochs`) is
// namedAtRunTime. Each right is returned with the row's line.
func documentedRights(t *testing.T) map[right]int {
	t.Helper()
	doc := readPage(t, securityPage)
	out := map[right]int{}
	inTable := false
	markdownLines(doc, func(n int, line string) {
		if !strings.HasPrefix(strings.TrimSpace(line), "|") {
			inTable = false
			return
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if slices.Equal(cells, rbacHeader) {
			inTable = true
			return
		}
		if !inTable || strings.Trim(strings.Join(cells, ""), "-: ") == "" {
			return
		}
		where := fmt.Sprintf("docs/%s:%d", securityPage, n)
		if len(cells) != len(rbacHeader) {
			t.Errorf("%s: %d cells, want %d (%s)", where, len(cells), len(rbacHeader), strings.Join(rbacHeader, " | "))
			return
		}
		m := roleCell.FindStringSubmatch(cells[0])
		if m == nil {
			t.Errorf("%s: the role %q is not ClusterRole `name` or Role `name`", where, cells[0])
			return
		}
		role := m[1] + " " + m[2]
		group := ""
		if g := codeInRow.FindStringSubmatch(cells[1]); g != nil {
			group = g[1]
		}
		resCell, namesCell, _ := strings.Cut(cells[2], " named ")
		var resources, names []string
		for _, r := range codeInRow.FindAllStringSubmatch(resCell, -1) {
			resources = append(resources, r[1])
		}
		for _, r := range codeInRow.FindAllStringSubmatch(namesCell, -1) {
			if strings.Contains(r[1], "<") {
				r[1] = namedAtRunTime
			}
			names = append(names, r[1])
		}
		if len(names) == 0 {
			names = []string{""}
		}
		var verbs []string
		for v := range strings.SplitSeq(cells[3], ",") {
			v = strings.TrimSpace(v)
			if !verbWord.MatchString(v) {
				t.Errorf("%s: %q is not a verb: write the verbs plain, separated by commas", where, v)
				continue
			}
			verbs = append(verbs, v)
		}
		if len(resources) == 0 || len(verbs) == 0 {
			t.Errorf("%s: no resource or no verb", where)
		}
		if cells[4] == "" {
			t.Errorf("%s: say why %s holds these rights", where, role)
		}
		for _, res := range resources {
			g := group
			if strings.HasPrefix(res, "/") {
				g = ""
			}
			for _, v := range verbs {
				for _, name := range names {
					out[right{role, g, res, name, v}] = n
				}
			}
		}
	})
	return out
}

// TestSecurityPageListsEveryRight keeps the RBAC tables of the security
// page and the Roles in step: every right of a Role or ClusterRole that
// config/default or config/selfsigned installs, or that the controller
// writes at run time (the agents' Role), is in a table of the page, and
// every right in a table is granted by the role the row names. The Helm
// chart installs copies of the same files (make manifests), which
// test/integration/deploy renders against kustomize's.
func TestSecurityPageListsEveryRight(t *testing.T) {
	held := append(installedRights(t), runtimeRights(t)...)
	if !slices.ContainsFunc(held, func(r right) bool { return r.role == runtimeRoles["controller.agentRules"] }) {
		t.Fatal("found no rule of the agents' Role in the code: the test no longer reads it")
	}
	documented := documentedRights(t)
	if len(documented) == 0 {
		t.Fatalf("docs/%s has no table headed | %s |: the test no longer reads it", securityPage, strings.Join(rbacHeader, " | "))
	}
	isHeld := map[right]bool{}
	for _, r := range held {
		if isHeld[r] {
			continue
		}
		isHeld[r] = true
		if _, ok := documented[r]; !ok {
			t.Errorf("docs/%s does not list %s", securityPage, r)
		}
	}
	for _, r := range slices.SortedFunc(maps.Keys(documented), func(a, b right) int { return strings.Compare(a.String(), b.String()) }) {
		if !isHeld[r] {
			t.Errorf("docs/%s:%d lists %s, which no Role holds", securityPage, documented[r], r)
		}
	}
}
