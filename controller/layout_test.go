package controller

import (
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ioFiles are the files of the package that talk to the API server: the
// reconcilers, the observe step and the event handlers. Every other file
// decides from what it is given and must not import a client, so that the
// decisions stay testable without one (see doc.go).
var ioFiles = []string{"agent_rbac_sync.go", "enqueue.go", "observe.go", "reconciler.go"}

var clientImports = []string{"k8s.io/client-go/", "sigs.k8s.io/controller-runtime"}

func TestDecisionFilesImportNoClient(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || slices.Contains(ioFiles, name) {
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
					t.Errorf("%s imports %s: decisions take what observe read, and only %v talk to the API server", name, path, ioFiles)
				}
			}
		}
	}
	if checked < 15 {
		t.Errorf("checked %d files, expected the package's decision files", checked)
	}
}
