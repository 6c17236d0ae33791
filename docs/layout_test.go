package docs

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const module = "github.com/inplace-dev/inplace"

// topLevel is one directory per part of the product (cmd, webhook,
// policies, controller, agent, config, test) and the build files, plus the
// conventional api/, hack/, docs/, examples/ and charts/, perf/ for the
// benchmarks, and python/ for the worker side of in-process restarts,
// which runs in the user's training program.
var topLevel = []string{
	".ci", ".dockerignore", ".gitignore", ".golangci.yml",
	"CHANGELOG.md", "Dockerfile", "LICENSE", "Makefile", "README.md", "VERSION",
	"agent", "api", "charts", "cmd", "config", "controller", "docs", "examples",
	"go.mod", "go.sum", "hack", "perf", "policies", "python", "test", "webhook",
}

// notProduct are the trees outside the product: test/ holds the product's
// tests, perf/ the benchmark programs and their lab, hack/ the repository's
// own tools (the release builder). Product code never imports them, and
// test/ never imports perf/.
var notProduct = []string{"test/", "perf/", "hack/"}

func isProduct(name string) bool {
	return !slices.ContainsFunc(notProduct, func(p string) bool { return strings.HasPrefix(name, p) })
}

// stdlibOnly marks the packages that may import the standard library alone.
const stdlibOnly = "standard library only"

// forbidden lists, for every package of the product, what it must never
// depend on, directly or through another package; docs/explanation/design.md says why.
// An entry ending in "/" forbids everything under it.
var forbidden = map[string][]string{
	"agent/supervisor":             {module + "/agent", module + "/controller", module + "/webhook", module + "/policies", module + "/cmd", "k8s.io/", "sigs.k8s.io/", "github.com/open-policy-agent/"},
	"agent":                        {module + "/controller", module + "/webhook", module + "/policies", module + "/cmd", "github.com/open-policy-agent/", "sigs.k8s.io/controller-runtime"},
	"api/config/v1alpha1":          {module + "/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"api/jobset/v1alpha2":          {module + "/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"api/policy/v1alpha1":          {module + "/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"api/protocol":                 {stdlibOnly},
	"cmd/agent":                    {module + "/controller", module + "/webhook", module + "/policies", "github.com/open-policy-agent/"},
	"cmd/supervisor":               {module + "/agent", module + "/controller", module + "/webhook", module + "/policies", module + "/cmd/agent", module + "/cmd/manager", module + "/cmd/inplacectl", "k8s.io/", "sigs.k8s.io/", "github.com/open-policy-agent/"},
	"cmd/inplacectl":               {module + "/controller", module + "/agent"},
	"cmd/inplacectl/app":           {module + "/controller", module + "/agent"},
	"cmd/inplacectl/migration":     {module + "/controller", module + "/agent", module + "/webhook", module + "/policies"},
	"cmd/kubectl-inplace":          {module + "/controller", module + "/agent"},
	"cmd/manager":                  {module + "/agent"},
	"cmd/manager/app":              {module + "/agent"},
	"cmd/internal/version":         {stdlibOnly},
	"config/crd":                   {stdlibOnly},
	"controller":                   {module + "/agent", module + "/webhook", module + "/policies", module + "/cmd", "github.com/open-policy-agent/"},
	"controller/podfailure":        {module + "/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"controller/internal/testutil": {module + "/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"controller/state":             {module + "/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"controller/decide":            {module + "/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"controller/coexist":           {module + "/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"controller/reports":           {module + "/", "github.com/open-policy-agent/"},
	"controller/reports/token":     {module + "/", "sigs.k8s.io/controller-runtime"},
	"docs":                         {module + "/"},
	"policies":                     {module + "/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"policies/builtin":             {stdlibOnly},
	"policies/jobsetpolicy":        {module + "/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"policies/reconciler":          {module + "/agent", module + "/controller", module + "/webhook", module + "/cmd"},
	"policies/report":              {module + "/agent", module + "/controller", module + "/webhook", module + "/cmd"},
	"policies/params":              {module + "/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime", "github.com/open-policy-agent/"},
	"policies/review":              {module + "/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"policies/inventorysync":       {module + "/agent", module + "/controller", module + "/webhook", module + "/cmd"},
	"webhook/offline/suite":        {module + "/agent", module + "/controller", module + "/cmd"},
	"policies/library":             {stdlibOnly},
	"webhook":                      {module + "/agent", module + "/controller", module + "/cmd", module + "/webhook/offline", module + "/policies/reconciler"},
	"webhook/offline":              {module + "/agent", module + "/controller", module + "/cmd"},
	"webhook/certs":                {stdlibOnly},
	"webhook/selfsigned":           {module + "/agent", module + "/controller", module + "/policies", module + "/cmd"},
	"webhook/inject":               {module + "/agent", module + "/controller", module + "/policies", module + "/cmd", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime", "github.com/open-policy-agent/"},
}

// allowed are the exceptions to forbidden: the APIs everyone may import
// (the JobSet API reads upstream's attempts through the protocol's epoch,
// which imports the standard library alone), and the sideways imports the layering allows (injection and the
// controller share podFailurePolicy matching; the migration check and the
// manager judge upstream JobSet's presence alike; the controller makes the
// report endpoint's CA with the webhook's CA helper, which imports the
// standard library alone).
var allowed = map[string][]string{
	"api/config/v1alpha1":          {module + "/api/config/v1alpha1"},
	"api/jobset/v1alpha2":          {module + "/api/jobset/v1alpha2", module + "/api/protocol"},
	"api/policy/v1alpha1":          {module + "/api/policy/v1alpha1"},
	"controller/internal/testutil": {module + "/api/jobset/v1alpha2", module + "/api/protocol"},
	"controller/state":             {module + "/api/jobset/v1alpha2", module + "/api/protocol", module + "/controller/podfailure"},
	"controller/decide":            {module + "/api/jobset/v1alpha2", module + "/api/protocol", module + "/controller/podfailure", module + "/controller/state"},
	"controller/coexist":           {module + "/api/jobset/v1alpha2", module + "/api/protocol"},
	"controller":                   {module + "/webhook/certs"},
	"controller/reports":           {module + "/api/jobset/v1alpha2", module + "/api/protocol", module + "/controller/reports/token", module + "/webhook/certs"},
	"policies":                     {module + "/policies/builtin"},
	"policies/jobsetpolicy":        {module + "/api/policy/v1alpha1", module + "/policies", module + "/policies/builtin", module + "/policies/params"},
	"policies/review":              {module + "/policies", module + "/policies/builtin"},
	"webhook/offline/suite":        {module + "/controller/podfailure"},
	"webhook":                      {module + "/controller/podfailure"},
	"webhook/inject":               {module + "/controller/podfailure"},
	"webhook/offline":              {module + "/controller/podfailure"},
	"cmd/inplacectl":               {module + "/controller/podfailure", module + "/controller/coexist"},
	"cmd/inplacectl/app":           {module + "/controller/podfailure", module + "/controller/coexist"},
	"cmd/inplacectl/migration":     {module + "/controller/coexist"},
	"cmd/kubectl-inplace":          {module + "/controller/podfailure", module + "/controller/coexist"},
	"cmd/supervisor":               {module + "/agent/supervisor"},
}

// pureTestsAvoid is what the tests of the pure packages must not import:
// they run without the harness.
var pureTestsAvoid = map[string]string{
	"policies/jobsetpolicy": module + "/test/",
	"policies/review":       module + "/test/",
	"webhook/inject":        module + "/test/",
	"controller/podfailure": module + "/test/",
	"controller/state":      module + "/test/",
	"controller/decide":     module + "/test/",
	"controller/coexist":    module + "/test/",
	"api/protocol":          module + "/test/",
}

type goPackage struct {
	ImportPath   string
	GoFiles      []string
	Deps         []string
	TestImports  []string
	XTestImports []string
}

func listPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []goPackage
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func rel(importPath string) string { return strings.TrimPrefix(importPath, module+"/") }

// TestTopLevelLayout keeps the repository's top level to topLevel.
func TestTopLevelLayout(t *testing.T) {
	cmd := exec.Command("git", "ls-files")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git work tree: %v", err)
	}
	var got []string
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		top, _, _ := strings.Cut(f, "/")
		if !slices.Contains(got, top) {
			got = append(got, top)
		}
	}
	slices.Sort(got)
	want := slices.Clone(topLevel)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("top-level entries (-want +got); a new one belongs under one of these, and docs/explanation/design.md says where:\n%s", diff)
	}
}

// TestImportRules checks what each package must never import, directly or
// not, and that every package says in its doc.go what it owns.
func TestImportRules(t *testing.T) {
	design, err := os.ReadFile("explanation/design.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range listPackages(t) {
		name := rel(p.ImportPath)
		if !slices.Contains(p.GoFiles, "doc.go") {
			t.Errorf("%s: no doc.go saying what the package owns and what it must never import", name)
		}
		if strings.HasPrefix(name, "test/") {
			for _, dep := range slices.Concat(p.Deps, p.TestImports, p.XTestImports) {
				if strings.HasPrefix(rel(dep), "perf/") {
					t.Errorf("%s imports %s: test/ holds the product's tests only, and never imports the benchmarks", name, rel(dep))
				}
			}
		}
		if !isProduct(name) {
			continue
		}
		for _, dep := range p.Deps {
			if !isProduct(rel(dep)) {
				t.Errorf("%s depends on %s: product code never imports test or benchmark code", name, rel(dep))
			}
		}
		if !strings.Contains(string(design), "`"+name+"`") {
			t.Errorf("%s: docs/explanation/design.md does not say why the package is where it is", name)
		}
		rules, ok := forbidden[name]
		if !ok {
			t.Errorf("%s: no import rule in docs/layout_test.go; every package of the product has one", name)
		}
		for _, dep := range p.Deps {
			for _, f := range rules {
				if slices.Contains(allowed[name], dep) {
					continue
				}
				if f == stdlibOnly && !isStdlib(dep) || dep == strings.TrimSuffix(f, "/") || strings.HasPrefix(dep, f) {
					t.Errorf("%s depends on %s, which it must never import (rule %q)", name, dep, f)
				}
			}
		}
		if avoid, ok := pureTestsAvoid[name]; ok {
			for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
				if strings.HasPrefix(imp, avoid) {
					t.Errorf("the tests of %s import %s: the tests of a pure package run without the harness", name, imp)
				}
			}
		}
	}
}

// isStdlib reports whether an import path is the standard library's: its
// first element has no dot.
func isStdlib(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}
