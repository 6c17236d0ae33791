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

// topLevel is the layout of the design card (cmd, webhook, policies,
// controller, agent, config, test and the build files) plus the
// conventional api/, hack/, docs/, examples/ and charts/.
var topLevel = []string{
	".ci", ".dockerignore", ".gitignore", ".golangci.yml",
	"Dockerfile", "Makefile", "README.md",
	"agent", "api", "charts", "cmd", "config", "controller", "docs", "examples",
	"go.mod", "go.sum", "hack", "policies", "test", "webhook",
}

// forbidden lists, for each package of the product, what it must never
// depend on, directly or through another package; docs/design.md says why.
// An entry ending in "/" forbids everything under it.
var forbidden = map[string][]string{
	"agent":                 {module + "/controller", module + "/webhook", module + "/policies", "github.com/open-policy-agent/", "sigs.k8s.io/controller-runtime"},
	"api/config/v1alpha1":   {module + "/agent", module + "/controller", module + "/webhook", module + "/policies", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"api/jobset/v1alpha2":   {module + "/agent", module + "/controller", module + "/webhook", module + "/policies", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"api/policy/v1alpha1":   {module + "/agent", module + "/controller", module + "/webhook", module + "/policies", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"api/protocol":          {module + "/", "k8s.io/", "sigs.k8s.io/"},
	"controller":            {module + "/agent", module + "/webhook", module + "/policies", "github.com/open-policy-agent/"},
	"controller/podfailure": {module + "/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"policies":              {module + "/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime"},
	"policies/builtin":      {module + "/", "k8s.io/", "sigs.k8s.io/"},
	"policies/reconciler":   {module + "/agent", module + "/controller", module + "/webhook"},
	"webhook":               {module + "/agent", module + "/controller"},
	"webhook/certs":         {module + "/", "k8s.io/", "sigs.k8s.io/"},
	"webhook/inject":        {module + "/agent", module + "/controller", module + "/policies", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime", "github.com/open-policy-agent/"},
	"cmd/inplacectl/app":    {module + "/controller", module + "/agent"},
	"cmd/manager/app":       {module + "/agent"},
}

// allowed are the exceptions to forbidden: the pure packages a forbidden
// prefix covers.
var allowed = map[string][]string{
	"policies":           {module + "/policies/builtin"},
	"webhook":            {module + "/controller/podfailure"},
	"webhook/inject":     {module + "/controller/podfailure", "sigs.k8s.io/controller-runtime/pkg/scheme"},
	"cmd/inplacectl/app": {module + "/controller/podfailure"},
}

type goPackage struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	Deps       []string
	Imports    []string
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

// TestTopLevelIsTheCard keeps the repository's top level to the card's.
func TestTopLevelIsTheCard(t *testing.T) {
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
		t.Errorf("top-level entries (-want +got); a new one belongs under one of the card's, and docs/design.md says where:\n%s", diff)
	}
}

// TestImportRules checks what each package must never import, directly or
// not, and that every package says in its doc.go what it owns.
func TestImportRules(t *testing.T) {
	design, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range listPackages(t) {
		name := rel(p.ImportPath)
		if !slices.Contains(p.GoFiles, "doc.go") {
			t.Errorf("%s: no doc.go saying what the package owns and what it must never import", name)
		}
		if strings.HasPrefix(name, "test/") {
			continue
		}
		for _, dep := range p.Deps {
			if strings.HasPrefix(rel(dep), "test/") {
				t.Errorf("%s depends on %s: product code never imports test code", name, rel(dep))
			}
		}
		if !strings.Contains(string(design), "`"+name+"`") {
			t.Errorf("%s: docs/design.md does not say why the package is where it is", name)
		}
		for _, dep := range p.Deps {
			for _, f := range forbidden[name] {
				if (dep == strings.TrimSuffix(f, "/") || strings.HasPrefix(dep, f)) && !slices.Contains(allowed[name], dep) {
					t.Errorf("%s depends on %s, which it must never import (rule %q)", name, dep, f)
				}
			}
		}
	}
}
