package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// run runs inplacectl's command line args, with nothing on standard
// input, and returns the exit status and what it printed.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runWith(t, NewCommand, "", args...)
}

// runWith runs the command line args of the command newCmd builds,
// reading stdin, and returns the exit status and what it printed. The
// kubeconfig is one that does not exist, so that the namespace is
// default whatever the machine's kubeconfig says.
func runWith(t *testing.T, newCmd func(genericiooptions.IOStreams) *cobra.Command, stdin string, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "no-kubeconfig"))
	streams, in, out, errOut := genericiooptions.NewTestIOStreams()
	in.WriteString(stdin)
	code := Execute(context.Background(), newCmd(streams), args)
	return code, out.String(), errOut.String()
}

// checkExit reports an exit status code that is not want, with what the
// command printed.
func checkExit(t *testing.T, code, want int, out, errOut string) {
	t.Helper()
	if code != want {
		t.Errorf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, want, out, errOut)
	}
}

// checkStreams reports each of wantStdout that is not in out, and each of
// wantStderr that is not in errOut.
func checkStreams(t *testing.T, out, errOut string, wantStdout, wantStderr []string) {
	t.Helper()
	for _, w := range wantStdout {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
	for _, w := range wantStderr {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
}

// jobSetYAML is an accepted JobSet named name.
func jobSetYAML(name string) string {
	return jobSetOf(name, replicatedJobYAML("w", "containers: [{name: c, image: registry.example/c:1}]"))
}

// jobSetOf is a JobSet named name of the replicated jobs given, each as
// replicatedJobYAML writes it.
func jobSetOf(name string, replicatedJobs ...string) string {
	return "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: " + name + "}\nspec:\n  replicatedJobs:\n" +
		strings.Join(replicatedJobs, "")
}

// replicatedJobYAML is a replicated job named name whose Pods are never
// restarted and have the fields podFields, one line each, besides.
func replicatedJobYAML(name string, podFields ...string) string {
	var b strings.Builder
	b.WriteString("  - name: " + name + "\n    template:\n      spec:\n        template:\n          spec:\n            restartPolicy: Never\n")
	for _, f := range podFields {
		b.WriteString("            " + f + "\n")
	}
	return b.String()
}

// unknownFieldYAML is a JobSet named name that strict decoding refuses:
// spec.replicatedJob is no field of it.
func unknownFieldYAML(name string) string {
	return "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: " + name + "}\nspec:\n  replicatedJob: []\n"
}

// listOf is a v1 List of the YAML documents items, indented as items.
func listOf(items ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for _, item := range items {
		for i, line := range strings.Split(strings.TrimSuffix(item, "\n"), "\n") {
			if i == 0 {
				b.WriteString("- " + line + "\n")
			} else {
				b.WriteString("  " + line + "\n")
			}
		}
	}
	return b.String()
}

const serviceAccountYAML = "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: train}\n"

// writeTree writes files (path relative to the directory: content) into
// a new directory, and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// deniedByAPolicy is a JobSet the built-in policies deny: a restart rule
// that is not a container restart action.
func deniedByAPolicy(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../../test/testdata/specs/inplace-story1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const rule = "action: RestartAllContainers\n                exitCodes:\n                  operator: NotIn"
	if !strings.Contains(string(data), rule) {
		t.Fatalf("inplace-story1.yaml has no rule %q", rule)
	}
	return strings.Replace(string(data), rule, strings.Replace(rule, "RestartAllContainers", "RestartPod", 1), 1)
}
