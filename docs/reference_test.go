package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
)

func reference(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("reference.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func expectNamed(t *testing.T, doc, what string, names []string) {
	t.Helper()
	if len(names) == 0 {
		t.Fatalf("found no %s in the code: the test no longer reads it", what)
	}
	for _, n := range names {
		if !strings.Contains(doc, "`"+n+"`") && !strings.Contains(doc, "`"+n+":") && !strings.Contains(doc, "`"+n+" ") {
			t.Errorf("docs/reference.md does not name the %s %q", what, n)
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
	expectNamed(t, reference(t), "metric", names)
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
	expectNamed(t, reference(t), "configuration field", paths)
}

// stringConstants returns the string constants of a Go file.
func stringConstants(t *testing.T, file string, keep func(name, value string) bool) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				value, _ := strconv.Unquote(lit.Value)
				if keep(vs.Names[i].Name, value) {
					out = append(out, value)
				}
			}
		}
	}
	return out
}

func TestReferenceNamesEveryReservedKey(t *testing.T) {
	isKey := func(_, v string) bool { return strings.Contains(v, ".") && strings.Contains(v, "/") }
	var keys []string
	keys = append(keys, stringConstants(t, "../api/jobset/v1alpha2/labels.go", isKey)...)
	keys = append(keys, stringConstants(t, "../webhook/inject/inject.go", isKey)...)
	keys = append(keys, stringConstants(t, "../test/simnode/simnode.go", isKey)...)
	expectNamed(t, reference(t), "label or annotation", keys)
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
	doc := reference(t)
	expectNamed(t, doc, "inplace-manager flag", flags)
	env := stringConstants(t, "../api/protocol/agent.go", func(name, _ string) bool { return strings.HasPrefix(name, "Env") })
	expectNamed(t, doc, "agent environment variable", env)
}

// TestReferenceNamesEveryReason keeps docs/reference.md naming every
// condition and Event reason the code sets: the constants named Reason*
// (not api/protocol's, which are the kubelet's reasons the code reads),
// and the reasons given to an Event as a literal (its fourth argument).
func TestReferenceNamesEveryReason(t *testing.T) {
	constant := regexp.MustCompile(`\bReason[A-Za-z]*\s*=\s*"([A-Za-z_]+)"`)
	literal := regexp.MustCompile(`Eventf\([^,\n]+,[^,\n]+,[^,\n]+,\s*"([A-Z][A-Za-z]+)"`)
	var names []string
	for _, f := range goSources(t) {
		if filepath.Dir(f) == filepath.Join("..", "api", "protocol") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range []*regexp.Regexp{constant, literal} {
			for _, m := range re.FindAllStringSubmatch(string(data), -1) {
				names = append(names, m[1])
			}
		}
	}
	expectNamed(t, reference(t), "reason", names)
}
