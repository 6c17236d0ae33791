package policies

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestResult is the outcome of one Rego test rule.
type TestResult struct {
	Name   string // package.rule
	Passed bool
	Detail string // why it failed
}

// RunRegoTests runs the test rules (test_*) of every .rego file in fsys,
// with the policies they test, as `opa test` would, but compiled as the
// manager compiles policies: strict and sandboxed.
func RunRegoTests(ctx context.Context, fsys fs.FS) ([]TestResult, error) {
	modules := map[string]*ast.Module{}
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".rego") {
			return err
		}
		src, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		m, err := ast.ParseModuleWithOpts(path, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return err
		}
		if err := checkSandbox(m); err != nil {
			return err
		}
		modules[path] = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(modules) == 0 {
		return nil, fmt.Errorf("no .rego files")
	}
	// The production compiler: a test passes only where the policy would
	// compile and run in the manager.
	ch, err := tester.NewRunner().
		SetCompiler(newCompiler(ast.RegoV1)).
		SetDefaultRegoVersion(ast.RegoV1).
		RaiseBuiltinErrors(true).
		SetModules(modules).
		RunTests(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []TestResult
	for r := range ch {
		t := TestResult{Name: strings.TrimPrefix(r.Package, "data.") + "." + r.Name, Passed: r.Pass()}
		switch {
		case r.Error != nil:
			t.Detail = r.Error.Error()
		case r.Fail && r.Location != nil:
			t.Detail = fmt.Sprintf("failed at %s", r.Location)
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
