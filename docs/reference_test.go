package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
)

// The pages of the reference that the tests below keep complete, relative
// to docs/.
const (
	labelsPage     = "reference/labels-and-annotations.md"
	configPage     = "reference/configuration.md"
	metricsPage    = "reference/metrics.md"
	conditionsPage = "reference/conditions-and-reasons.md"
)

func readPage(t *testing.T, page string) string {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// expectNamed checks that page names each of names in backquotes.
func expectNamed(t *testing.T, page, what string, names []string) {
	t.Helper()
	if len(names) == 0 {
		t.Fatalf("found no %s in the code: the test no longer reads it", what)
	}
	doc := readPage(t, page)
	for _, n := range names {
		if !strings.Contains(doc, "`"+n+"`") && !strings.Contains(doc, "`"+n+":") && !strings.Contains(doc, "`"+n+" ") {
			t.Errorf("docs/%s does not name the %s %q", page, what, n)
		}
	}
}

// goSources lists the project's non-test Go files outside test/ and perf/
// (the benchmarks, whose flags and metrics are not the product's).
func goSources(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "test" || d.Name() == "bin" || path == filepath.Join("..", "perf") || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestReferenceNamesEveryMetric(t *testing.T) {
	re := regexp.MustCompile(`Name:\s+"(inplace_[a-z_]+)"`)
	var names []string
	for _, f := range goSources(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			names = append(names, m[1])
		}
	}
	expectNamed(t, metricsPage, "metric", names)
}

func TestReferenceNamesEveryConfigurationField(t *testing.T) {
	var paths []string
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			path := prefix + name
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			// Descend into the configuration's own structs only.
			if ft.Kind() == reflect.Struct && ft.PkgPath() == typ.PkgPath() {
				walk(path+".", ft)
				continue
			}
			paths = append(paths, path)
		}
	}
	walk("", reflect.TypeFor[configv1alpha1.Configuration]())
	expectNamed(t, configPage, "configuration field", paths)
}

// stringConstants returns the string constants of a Go file.
func stringConstants(t *testing.T, file string, keep func(name, value string) bool) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	eachStringConstant(f, func(vs *ast.ValueSpec, name *ast.Ident, value string) {
		if keep(name.Name, value) {
			out = append(out, value)
		}
	})
	return out
}

// eachStringConstant calls visit with every constant of f whose value is a
// string literal.
func eachStringConstant(f *ast.File, visit func(spec *ast.ValueSpec, name *ast.Ident, value string)) {
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					value, _ := strconv.Unquote(lit.Value)
					visit(vs, vs.Names[i], value)
				}
			}
		}
	}
}

func TestReferenceNamesEveryReservedKey(t *testing.T) {
	isKey := func(_, v string) bool { return strings.Contains(v, ".") && strings.Contains(v, "/") }
	var keys []string
	keys = append(keys, stringConstants(t, "../api/jobset/v1alpha2/labels.go", isKey)...)
	keys = append(keys, stringConstants(t, "../webhook/inject/inject.go", isKey)...)
	keys = append(keys, stringConstants(t, "../test/simnode/simnode.go", isKey)...)
	expectNamed(t, labelsPage, "label or annotation", keys)
}

func TestReferenceNamesEveryFlagAndAgentVariable(t *testing.T) {
	data, err := os.ReadFile("../cmd/manager/main.go")
	if err != nil {
		t.Fatal(err)
	}
	var flags []string
	for _, m := range regexp.MustCompile(`flag\.\w+Var\(&\w+, "([^"]+)"`).FindAllStringSubmatch(string(data), -1) {
		flags = append(flags, "--"+m[1])
	}
	expectNamed(t, configPage, "inplace-manager flag", flags)
	isEnv := func(name, _ string) bool { return strings.HasPrefix(name, "Env") }
	env := stringConstants(t, "../api/protocol/agent.go", isEnv)
	// Process scope's: the agent's and what the supervisor gives a worker.
	env = append(env, stringConstants(t, "../api/protocol/process.go", isEnv)...)
	// In-process scope's: what the supervisor gives a worker.
	env = append(env, stringConstants(t, "../api/protocol/inprocess.go", isEnv)...)
	expectNamed(t, configPage, "agent environment variable", env)
}

// reasonPackages are the trees whose code sets conditions and records
// Events. Left out: api/protocol, whose reasons are the kubelet's, which
// the agent reads, and cmd/, where inplacectl names the controller's
// reasons it reads (it may not import the controller).
var reasonPackages = []string{"api/jobset", "api/policy", "controller", "webhook", "policies", "agent"}

// isReasonConstant says whether a constant names a condition type or
// reason: Reason*, Condition* and reason* (a format such as
// "FailurePolicy_%s"), or a constant of a *ConditionType type.
func isReasonConstant(name string, typ ast.Expr) bool {
	if id, ok := typ.(*ast.Ident); ok && strings.HasSuffix(id.Name, "ConditionType") {
		return true
	}
	for _, prefix := range []string{"Reason", "Condition", "reason"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok && (rest == "" || rest[0] >= 'A' && rest[0] <= 'Z') {
			return true
		}
	}
	return false
}

// eventReasonArg is the index of the reason among the arguments of an
// Event recorder's method: events.EventRecorder's Eventf(regarding,
// related, type, reason, action, note, args...), or record.EventRecorder's
// Event(object, type, reason, message) and Eventf(object, type, reason,
// format, args...).
func eventReasonArg(call *ast.CallExpr) int {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return -1
	}
	switch {
	case sel.Sel.Name == "Eventf" && len(call.Args) >= 6:
		return 3
	case sel.Sel.Name == "Eventf" && len(call.Args) >= 4, sel.Sel.Name == "Event" && len(call.Args) == 4:
		return 2
	case sel.Sel.Name == "AnnotatedEventf" && len(call.Args) >= 5:
		return 3
	}
	return -1
}

// reasonsInCode returns the condition types and reasons the product's code
// sets, each with where it is defined or used: the string constants that
// isReasonConstant keeps, the reason of every Event recorded with a
// constant or a literal, and the Type and Reason of every metav1.Condition
// written with one. A format's verbs read as "<": "FailurePolicy_%s" is
// "FailurePolicy_<".
func reasonsInCode(t *testing.T) map[string]string {
	t.Helper()
	type file struct {
		dir string
		ast *ast.File
	}
	fset := token.NewFileSet()
	var files []file
	for _, path := range goSources(t) {
		dir := filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, "../")))
		if !slices.ContainsFunc(reasonPackages, func(p string) bool { return dir == p || strings.HasPrefix(dir, p+"/") }) {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, file{dir, f})
	}

	found := map[string]string{}
	add := func(value string, pos token.Pos) {
		if i := strings.IndexByte(value, '%'); i >= 0 {
			value = value[:i] + "<"
		}
		if _, seen := found[value]; !seen {
			p := fset.Position(pos)
			found[value] = fmt.Sprintf("%s:%d", strings.TrimPrefix(p.Filename, "../"), p.Line)
		}
	}
	// Every string constant, by package directory and name, to resolve the
	// reasons that Events and conditions are given.
	constants := map[string]string{}
	for _, f := range files {
		eachStringConstant(f.ast, func(vs *ast.ValueSpec, name *ast.Ident, value string) {
			constants[f.dir+"."+name.Name] = value
			if isReasonConstant(name.Name, vs.Type) {
				add(value, name.Pos())
			}
		})
	}
	for _, f := range files {
		imports := map[string]string{}
		for _, imp := range f.ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = strings.TrimPrefix(path, module+"/")
		}
		// value resolves a literal or a constant; a variable (an Event
		// planned elsewhere) resolves to nothing, its reason being one of
		// the constants.
		value := func(e ast.Expr) (string, bool) {
			switch e := e.(type) {
			case *ast.BasicLit:
				if e.Kind == token.STRING {
					v, err := strconv.Unquote(e.Value)
					return v, err == nil
				}
			case *ast.Ident:
				v, ok := constants[f.dir+"."+e.Name]
				return v, ok
			case *ast.SelectorExpr:
				if pkg, ok := e.X.(*ast.Ident); ok {
					v, ok := constants[imports[pkg.Name]+"."+e.Sel.Name]
					return v, ok
				}
			}
			return "", false
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if i := eventReasonArg(n); i >= 0 {
					if v, ok := value(n.Args[i]); ok {
						add(v, n.Args[i].Pos())
					}
				}
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Condition" {
					return true
				}
				for _, elt := range n.Elts {
					kv, ok := elt.(*ast.KeyValueExpr)
					if key, isIdent := kv.Key.(*ast.Ident); !ok || !isIdent || (key.Name != "Type" && key.Name != "Reason") {
						continue
					}
					if v, ok := value(kv.Value); ok {
						add(v, kv.Value.Pos())
					}
				}
			}
			return true
		})
	}
	return found
}

// reasonsDocumented returns the names in backquotes in the first column of
// the tables of the conditions-and-reasons page, with "<" ending a name
// that has a placeholder ("FailurePolicy_<rule>" is "FailurePolicy_<").
func reasonsDocumented(t *testing.T) map[string]bool {
	t.Helper()
	section := readPage(t, conditionsPage)
	code := regexp.MustCompile("`([^`]+)`")
	documented := map[string]bool{}
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "|") {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			name := m[1]
			if i := strings.IndexByte(name, '<'); i >= 0 {
				name = name[:i+1]
			}
			documented[name] = true
		}
	}
	return documented
}

// TestReferenceNamesEveryReason keeps the tables of the
// conditions-and-reasons page and the code in step: every condition type and
// reason the code sets is in a table, and every name in a table is set by
// the code.
func TestReferenceNamesEveryReason(t *testing.T) {
	inCode := reasonsInCode(t)
	if len(inCode) == 0 {
		t.Fatal("found no condition or reason in the code: the test no longer reads it")
	}
	documented := reasonsDocumented(t)
	for _, name := range slices.Sorted(maps.Keys(inCode)) {
		if !documented[name] {
			t.Errorf("docs/%s does not name %q (%s) in the first column of a table", conditionsPage, name, inCode[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := inCode[name]; !ok {
			t.Errorf("docs/%s names %q, which no code sets", conditionsPage, name)
		}
	}
}
