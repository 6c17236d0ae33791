package decide

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

var clientImports = []string{"k8s.io/client-go/", "sigs.k8s.io/controller-runtime"}

// TestDecisionsImportNoClient keeps every file of the package free of a
// client: the decisions take what the reconciler observed (package
// controller talks to the API server), so that they stay testable without
// one (see doc.go). docs/layout_test.go checks the same of the package's
// dependencies, transitively.
func TestDecisionsImportNoClient(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, c := range clientImports {
				if strings.HasPrefix(path, c) {
					t.Errorf("%s imports %s: decisions take what the reconciler observed, and only package controller talks to the API server", name, path)
				}
			}
		}
	}
	if checked < 15 {
		t.Errorf("checked %d files, expected the package's decision files", checked)
	}
}
