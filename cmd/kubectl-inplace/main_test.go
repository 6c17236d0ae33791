package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/inplace-dev/inplace/cmd/inplacectl/app"
	"github.com/inplace-dev/inplace/test/cluster"
)

// TestThroughKubectl builds the plugin, puts it alone on PATH and runs it
// through a real kubectl (bin/kubectl, from make cluster-binaries): as
// `kubectl inplace`, in kubectl's plugin list, and in kubectl's shell
// completion through kubectl_complete-inplace.
func TestThroughKubectl(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kubectl-inplace and runs it through bin/kubectl (make cluster-binaries); not under -short")
	}
	binDir, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(binDir, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("no kubectl to run the plugin through: %v; run make cluster-binaries", err)
	}
	dir := t.TempDir()
	plugin := filepath.Join(dir, app.PluginName)
	if out, err := exec.Command("go", "build", "-o", plugin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.Symlink(app.PluginName, filepath.Join(dir, app.CompletionHelperName)); err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../examples/in-place-restart/jobset.yaml")
	if err != nil {
		t.Fatal(err)
	}

	// kubectl finds plugins on PATH: the temporary directory alone, so
	// that no other kubectl-inplace shadows this one. No cluster is
	// needed, and the machine's kubeconfig is left out.
	kubectlRun := func(t *testing.T, stdin []byte, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(kubectl, args...)
		cmd.Env = []string{"PATH=" + dir, "HOME=" + dir, "KUBECONFIG=" + filepath.Join(dir, "no-kubeconfig")}
		cmd.Stdin = bytes.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
		return code, out.String(), errOut.String()
	}

	cases := map[string]struct {
		args     []string
		stdin    []byte
		wantCode int
		// wantStdout and wantStderr must each be in the stream.
		wantStdout []string
		wantStderr []string
		check      func(t *testing.T, stdout string)
	}{
		"version": {
			args:       []string{"inplace", "version"},
			wantStdout: []string{app.PluginName + " v", "(commit "},
		},
		"render -f - -o yaml": {
			args: []string{"inplace", "render", "-f", "-", "-o", "yaml"}, stdin: example,
			wantStderr: []string{"# Verdict: accepted"},
			check: func(t *testing.T, stdout string) {
				var js struct {
					Kind     string `json:"kind"`
					Metadata struct {
						Annotations map[string]string `json:"annotations"`
					} `json:"metadata"`
				}
				if err := yaml.Unmarshal([]byte(stdout), &js); err != nil || js.Kind != "JobSet" || js.Metadata.Annotations["inplace.dev/injected"] == "" ||
					strings.Contains(stdout, "# ") || strings.Contains(stdout, "\n---") {
					t.Errorf("stdout is not the injected JobSet alone (%v):\n%s", err, stdout)
				}
			},
		},
		"the usage line": {
			args:       []string{"inplace", "render", "--help"},
			wantStdout: []string{"kubectl inplace render -f FILENAME [flags]", "  kubectl inplace render -f jobset.yaml -o yaml | kubectl apply -f -"},
		},
		"bad usage": {
			args: []string{"inplace", "render"}, wantCode: 2,
			wantStderr: []string{`required flag(s) "filename" not set`, "See 'kubectl inplace render --help' for usage."},
		},
		"plugin list": {
			args:       []string{"plugin", "list"},
			wantStdout: []string{plugin},
		},
		"completion of the subcommands": {
			args:       []string{"__complete", "inplace", ""},
			wantStdout: []string{"render\t", "policy\t", "status\t", "version\t"},
			check: func(t *testing.T, stdout string) {
				// kubectl never loads a script of the plugin's.
				if strings.Contains(stdout, "completion\t") {
					t.Errorf("the plugin offers its completion command:\n%s", stdout)
				}
			},
		},
		"completion of a flag's values": {
			args:       []string{"__complete", "inplace", "status", "--output", ""},
			wantStdout: []string{"wide\n", "json\n", "yaml\n", ":4\n"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := kubectlRun(t, tc.stdin, tc.args...)
			if code != tc.wantCode {
				t.Errorf("kubectl %s: exit %d, want %d; stdout:\n%s\nstderr:\n%s", strings.Join(tc.args, " "), code, tc.wantCode, out, errOut)
			}
			for _, w := range tc.wantStdout {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if tc.check != nil {
				tc.check(t, out)
			}
		})
	}
}
