package app

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"
)

const minimal = "../../../webhook/inject/testdata/minimal.yaml"

// TestCommandLine holds the command line to kubectl's conventions: flags
// with two dashes and short forms, help per subcommand, exit 2 on bad
// usage with a message naming the flag or the argument, 1 on a failure.
func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		newCmd   func(genericiooptions.IOStreams) *cobra.Command
		args     []string
		wantCode int
		// wantStdout and wantStderr must each be in the stream,
		// wantNotStdout not.
		wantStdout, wantNotStdout []string
		wantStderr                []string
	}{
		"alone, the help": {
			wantStdout: []string{"Usage:\n  inplacectl [command]", "Available Commands:", "render ", "policy ", "status ", "version ", "completion "},
		},
		"--help": {
			args:       []string{"--help"},
			wantStdout: []string{"Exit status: 0 on success", "--kubeconfig string", "-n, --namespace string"},
		},
		"render --help": {
			args: []string{"render", "--help"},
			wantStdout: []string{"Usage:\n  inplacectl render -f FILENAME [flags]", "Examples:\n", "  inplacectl render -f jobset.yaml -o yaml | kubectl apply -f -",
				"-f, --filename string", "-o, --output string", "--config string", "Global Flags:"},
		},
		"policy eval --help": {
			args:       []string{"policy", "eval", "--help"},
			wantStdout: []string{"inplacectl policy eval -p DIR -f FILENAME [flags]", "-p, --policy-dir string", "--params string", "--mutate"},
		},
		"help status": {
			args:       []string{"help", "status"},
			wantStdout: []string{"inplacectl status JOBSET [flags]", "-o, --output string", "--agent-container string", "--context string"},
		},
		"the plugin's help": {
			newCmd: NewPluginCommand, args: []string{"status", "--help"},
			wantStdout: []string{"Usage:\n  kubectl inplace status JOBSET [flags]", "  kubectl inplace status train -n ml --context prod -o json"},
		},
		"the plugin's help, without completion": {
			newCmd: NewPluginCommand, args: []string{"--help"},
			wantStdout:    []string{"Usage:\n  kubectl inplace [command]", "render ", "version "},
			wantNotStdout: []string{"completion "},
		},
		"the plugin's commands completed, without completion": {
			newCmd: NewPluginCommand, args: []string{cobra.ShellCompRequestCmd, ""},
			wantStdout:    []string{"render\t", "status\t", "version\t", ":4\n"},
			wantNotStdout: []string{"completion\t"},
		},
		"the plugin's version": {
			newCmd: NewPluginCommand, args: []string{"version"},
			wantStdout: []string{"kubectl-inplace v"},
		},
		"an unknown command": {
			args: []string{"rendr"}, wantCode: 2,
			wantStderr: []string{`error: unknown command "rendr" for "inplacectl"`, "Did you mean this?\n\trender", "See 'inplacectl --help' for usage."},
		},
		"an unknown policy command": {
			args: []string{"policy", "evl"}, wantCode: 2,
			wantStderr: []string{`unknown command "evl" for "inplacectl policy"`, "Did you mean this?\n\teval", "See 'inplacectl policy --help' for usage."},
		},
		"the plugin's unknown command": {
			newCmd: NewPluginCommand, args: []string{"stats"}, wantCode: 2,
			wantStderr: []string{`unknown command "stats" for "kubectl inplace"`, "See 'kubectl inplace --help' for usage."},
		},
		"render without -f": {
			args: []string{"render"}, wantCode: 2,
			wantStderr: []string{`error: required flag(s) "filename" not set`, "See 'inplacectl render --help' for usage."},
		},
		"-f without a value": {
			args: []string{"render", "-f"}, wantCode: 2,
			wantStderr: []string{"flag needs an argument: 'f' in -f"},
		},
		"an unknown flag": {
			args: []string{"render", "-f", minimal, "--bogus"}, wantCode: 2,
			wantStderr: []string{"unknown flag: --bogus"},
		},
		"a long flag with one dash": {
			args: []string{"status", "train", "-kubeconfig", kubeconfig}, wantCode: 2,
			wantStderr: []string{"unknown shorthand flag: 'k' in -kubeconfig: long flags take two dashes: --kubeconfig"},
		},
		"a long flag of a subcommand with one dash": {
			args: []string{"policy", "eval", "-p", dir, "-f", minimal, "-mutate"}, wantCode: 2,
			wantStderr: []string{"long flags take two dashes: --mutate"},
		},
		"an argument to render": {
			args: []string{"render", minimal}, wantCode: 2,
			wantStderr: []string{"inplacectl render takes no arguments", "give the manifest with -f FILENAME"},
		},
		"render -o of an unknown format": {
			args: []string{"render", "-f", minimal, "-o", "wide"}, wantCode: 2,
			wantStderr: []string{`--output "wide": use json or yaml`},
		},
		"render of a file that is not there": {
			args: []string{"render", "-f", filepath.Join(dir, "absent.yaml")}, wantCode: 1,
			wantStderr: []string{"absent.yaml: no such file or directory"},
		},
		"render --config that is not there": {
			args: []string{"render", "-f", minimal, "--config", filepath.Join(dir, "absent.yaml")}, wantCode: 1,
			wantStderr: []string{"--config: "},
		},
		"status without a name": {
			args: []string{"status"}, wantCode: 2,
			wantStderr: []string{"name one JobSet: inplacectl status JOBSET [-n NAMESPACE], got 0 arguments"},
		},
		"status of two names": {
			args: []string{"status", "a", "b"}, wantCode: 2,
			wantStderr: []string{"name one JobSet"},
		},
		"status -o of an unknown format": {
			args: []string{"status", "train", "-o", "table"}, wantCode: 2,
			wantStderr: []string{`--output "table": use wide, json or yaml`},
		},
		"status with a kubeconfig of no usable context": {
			args: []string{"status", "train", "--kubeconfig", kubeconfig}, wantCode: 1,
			wantStderr: []string{`loading the kubeconfig: `, `context was not found for specified context: nowhere`},
		},
		"status with a --context the kubeconfig lacks": {
			args: []string{"status", "train", "--kubeconfig", kubeconfig, "--context", "elsewhere"}, wantCode: 1,
			wantStderr: []string{`context "elsewhere" does not exist`},
		},
		"policy test without a directory": {
			args: []string{"policy", "test"}, wantCode: 2,
			wantStderr: []string{"inplacectl policy test takes one DIR, got 0 arguments"},
		},
		"policy eval without -p": {
			args: []string{"policy", "eval", "-f", minimal}, wantCode: 2,
			wantStderr: []string{`required flag(s) "policy-dir" not set`},
		},
		"version with an argument": {
			args: []string{"version", "now"}, wantCode: 2,
			wantStderr: []string{`inplacectl version takes no arguments, got ["now"]`},
		},
		"completion of the commands": {
			args:       []string{cobra.ShellCompRequestCmd, ""},
			wantStdout: []string{"render\t", "policy\t", "status\t", "version\t", "completion\t", ":4\n"},
		},
		"completion of render's --output": {
			args:       []string{cobra.ShellCompRequestCmd, "render", "-o", ""},
			wantStdout: []string{"json\nyaml\n:4\n"},
		},
		"completion of -f": {
			args:       []string{cobra.ShellCompRequestCmd, "render", "-f", ""},
			wantStdout: []string{"yaml\nyml\njson\n:8\n"},
		},
		"completion of --context from the kubeconfig": {
			args:       []string{"--kubeconfig", kubeconfig, cobra.ShellCompRequestCmd, "status", "--context", ""},
			wantStdout: []string{":4\n"},
		},
		"a bash completion script": {
			args:       []string{"completion", "bash"},
			wantStdout: []string{"# bash completion V2 for inplacectl"},
		},
		"a zsh completion script for the plugin's binary": {
			newCmd: NewPluginCommand, args: []string{"completion", "zsh"},
			wantStdout: []string{"#compdef kubectl-inplace"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			newCmd := tc.newCmd
			if newCmd == nil {
				newCmd = NewCommand
			}
			code, out, errOut := runWith(t, newCmd, "", tc.args...)
			checkExit(t, code, tc.wantCode, out, errOut)
			checkStreams(t, out, errOut, tc.wantStdout, tc.wantStderr)
			for _, w := range tc.wantNotStdout {
				if strings.Contains(out, w) {
					t.Errorf("stdout has %q:\n%s", w, out)
				}
			}
		})
	}
}

// render -o prints the JobSets the API server would store and nothing
// else; the decisions and verdicts go to standard error, and the verdict
// still decides the exit status.
func TestRenderOutput(t *testing.T) {
	good := jobSetYAML
	refused := unknownFieldYAML("refused")
	cases := map[string]struct {
		stdin      string
		args       []string
		wantCode   int
		wantNames  []string // the JobSets on stdout, in order
		wantNS     string
		wantStderr []string
	}{
		"yaml": {
			stdin: good("a"), args: []string{"-o", "yaml"},
			wantNames: []string{"a"}, wantNS: "default",
			wantStderr: []string{"# Decisions:", "# Verdict: accepted"},
		},
		"json": {
			stdin: good("a"), args: []string{"-o", "json"},
			wantNames: []string{"a"}, wantNS: "default",
			wantStderr: []string{"# Verdict: accepted"},
		},
		"yaml, in a namespace": {
			stdin: good("a"), args: []string{"-o", "yaml", "-n", "ml"},
			wantNames: []string{"a"}, wantNS: "ml",
		},
		"yaml, several documents": {
			stdin: serviceAccountYAML + "---\n" + good("a") + "---\n" + good("b"), args: []string{"-o", "yaml"},
			wantNames:  []string{"a", "b"},
			wantStderr: []string{"# Skipped: v1 ServiceAccount train: render answers JobSets"},
		},
		"json, several documents": {
			stdin: good("a") + "---\n" + good("b"), args: []string{"--output=json"},
			wantNames: []string{"a", "b"},
		},
		"yaml, one refused": {
			stdin: good("a") + "---\n" + refused, args: []string{"-o", "yaml"}, wantCode: 1,
			wantNames:  []string{"a"},
			wantStderr: []string{`# Verdict: refused: JobSet in version "v1alpha2" cannot be handled as a JobSet: strict decoding error: unknown field "spec.replicatedJob"`},
		},
		"yaml, refused by a policy": {
			stdin: deniedByAPolicy(t), args: []string{"-o", "yaml"}, wantCode: 1,
			wantStderr: []string{"# deny   pod_template: ", "# Verdict: refused: admission webhook"},
		},
		"yaml, empty standard input": {
			args: []string{"-o", "yaml"}, wantCode: 1,
			wantStderr: []string{"standard input: no object in it"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runWith(t, NewCommand, tc.stdin, append([]string{"render", "-f", "-"}, tc.args...)...)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, errOut)
			}
			checkStreams(t, out, errOut, nil, tc.wantStderr)
			var names []string
			for _, obj := range storedObjects(t, out) {
				if obj.Kind != "JobSet" || obj.APIVersion != "jobset.x-k8s.io/v1alpha2" {
					t.Errorf("stdout holds a %s %s, not a JobSet", obj.APIVersion, obj.Kind)
				}
				if tc.wantNS != "" && obj.Metadata.Namespace != tc.wantNS {
					t.Errorf("%s in namespace %q, want %q", obj.Metadata.Name, obj.Metadata.Namespace, tc.wantNS)
				}
				names = append(names, obj.Metadata.Name)
			}
			if diff := cmp.Diff(tc.wantNames, names); diff != "" {
				t.Errorf("the JobSets on stdout (-want +got):\n%s\nstdout:\n%s", diff, out)
			}
		})
	}
}

type storedObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// storedObjects reads what render -o printed: YAML documents separated by
// ---, or JSON objects one after another, as kubectl apply -f reads them;
// a comment line is not allowed.
func storedObjects(t *testing.T, out string) []storedObject {
	t.Helper()
	if strings.Contains(out, "# ") {
		t.Errorf("stdout holds notes:\n%s", out)
	}
	var objs []storedObject
	if strings.HasPrefix(out, "{") {
		dec := json.NewDecoder(strings.NewReader(out))
		for dec.More() {
			var o storedObject
			if err := dec.Decode(&o); err != nil {
				t.Fatalf("stdout is not JSON objects: %v\n%s", err, out)
			}
			objs = append(objs, o)
		}
		return objs
	}
	for _, doc := range strings.Split(out, "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o storedObject
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("stdout is not YAML documents: %v\n%s", err, out)
		}
		objs = append(objs, o)
	}
	return objs
}

func TestPluginArgs(t *testing.T) {
	cases := map[string]struct {
		program string
		args    []string
		want    []string
	}{
		"the plugin":                   {program: "/usr/local/bin/kubectl-inplace", args: []string{"status", "x"}, want: []string{"status", "x"}},
		"the completion helper":        {program: "/home/u/.krew/bin/kubectl_complete-inplace", args: []string{"status", ""}, want: []string{"__complete", "status", ""}},
		"the completion helper (.exe)": {program: `kubectl_complete-inplace.exe`, args: []string{""}, want: []string{"__complete", ""}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PluginArgs(tc.program, tc.args)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestNoClusterToReadFrom: with nothing naming a cluster, the commands
// that read one say what is missing before they build a client, instead
// of dialling client-go's default, http://localhost:8080, whose "connection
// refused" (or whatever answers there) says nothing of the cause.
func TestNoClusterToReadFrom(t *testing.T) {
	// Not in a Pod, whatever runs the tests: the in-cluster configuration
	// would stand in for a kubeconfig.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	dir := t.TempDir()
	noCluster := filepath.Join(dir, "no-cluster")
	if err := os.WriteFile(noCluster, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"status, no kubeconfig":                   {"status", "train"},
		"migrate, no kubeconfig":                  {"migrate"},
		"status, a kubeconfig that names nothing": {"--kubeconfig", noCluster, "status", "train"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := runWith(t, NewCommand, "", args...)
			if code != 1 || errOut != "error: "+errNoCluster.Error()+"\n" {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, errOut, errNoCluster)
			}
		})
	}
	t.Run("completion, no kubeconfig", func(t *testing.T) {
		// cobra writes a completion's errors to the process's standard
		// error.
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr := os.Stderr
		os.Stderr = w
		code, out, _ := runWith(t, NewCommand, "", cobra.ShellCompRequestCmd, "status", "")
		os.Stderr = stderr
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		logged, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if code != 0 || out != ":4\n" || !strings.Contains(string(logged), errNoCluster.Error()) {
			t.Errorf("exit %d, stdout %q, stderr %q; want no names and %q", code, out, logged, errNoCluster)
		}
	})
	t.Run("--server given", func(t *testing.T) {
		// A cluster named on the command line is dialled: whatever the
		// outcome, it is not the hint.
		code, _, errOut := runWith(t, NewCommand, "", "--server", "http://127.0.0.1:1", "--request-timeout", "2s", "status", "train")
		if code != 1 || strings.Contains(errOut, "no cluster to read from") {
			t.Errorf("exit %d, stderr %q; want 1 and an error from the server's address", code, errOut)
		}
	})
}
