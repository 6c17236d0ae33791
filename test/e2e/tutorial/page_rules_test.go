package tutorial

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/inplace-dev/inplace/test/cluster"
)

// The page parses into its steps' blocks, each with an output. Each output
// is normalized once and for all (normalizing it again changes nothing: no
// placeholder reads as what varies), and matches a run that printed the
// lines it shows, the ellipses' none: what the suite runs is what the page
// shows.
func TestPageParses(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parsePage(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string]bool{}
	for _, b := range blocks {
		steps[b.step] = true
		want := normalize(strings.Join(b.output, "\n"))
		if again := normalize(strings.Join(want, "\n")); !slices.Equal(again, want) {
			t.Errorf("line %d: the output normalized twice:\n%s\nonce:\n%s", b.outputLine, strings.Join(again, "\n"), strings.Join(want, "\n"))
		}
		var shown []string
		for _, line := range b.output {
			if strings.TrimSpace(line) != ellipsis {
				shown = append(shown, line)
			}
		}
		if got := normalize(strings.Join(shown, "\n")); !matchLines(want, got) {
			t.Errorf("line %d: the output does not match a run that printed the lines it shows (%s)", b.outputLine, firstDifference(want, got))
		}
		if strings.Contains(b.command, "REAL_NODES=") && !strings.Contains(b.command, "REAL_NODES=0") {
			t.Errorf("line %d: a step that starts real nodes: the suite runs on simulated ones", b.line)
		}
	}
	if len(steps) < 2 || !strings.HasPrefix(blocks[0].step, "1. ") {
		t.Errorf("steps %v: want the page's numbered steps, from 1", slices.Sorted(maps.Keys(steps)))
	}
	// The numbers change with the page's steps, and only with them.
	if len(blocks) != 17 || len(steps) != 8 {
		t.Errorf("%d command blocks in %d steps, want 17 in 8", len(blocks), len(steps))
	}
}

func TestParsePage(t *testing.T) {
	for name, tc := range map[string]struct {
		doc     string
		want    []block
		wantErr string
	}{
		"steps, their blocks and outputs; other sections and languages are not run": {
			doc: "# T\n\n## Before you begin\n\n```sh\nnot run\n```\n\n## 1. One\n\n```sh\na\nb\n```\n\ntext\n\n```text\nout\n```\n\n" +
				"```yaml\nkind: X\n```\n\n## 2. Two\n\n   ```sh\n   c\n   ```\n\n   ```console\n   x\n\n   y\n   ```\n\n## Next\n\n```sh\nnot run\n```\n",
			want: []block{
				{step: "1. One", line: 11, command: "a\nb\n", output: []string{"out"}, outputLine: 18},
				{step: "2. Two", line: 28, command: "c\n", output: []string{"x", "", "y"}, outputLine: 32},
			},
		},
		"a subsection is part of its step, a title ends the steps, and a heading in a block is none": {
			doc: "## 1. One\n\n### Detail\n\n```sh\na\n```\n\n```text\n## 2. Not a step\n```\n\n# Appendix\n\n```sh\nnot run\n```\n",
			want: []block{
				{step: "1. One", line: 5, command: "a\n", output: []string{"## 2. Not a step"}, outputLine: 9},
			},
		},
		"a code block that does not end": {
			doc:     "## 1. One\n\n```sh\na\n```\n\n```text\nout\n",
			wantErr: "line 7: a code block that does not end",
		},
		"a command without its output": {
			doc:     "## 1. One\n\n```sh\na\n```\n\n```sh\nb\n```\n\n```text\nout\n```\n",
			wantErr: "line 3: a command block without the output block it prints",
		},
		"an output without its command": {
			doc:     "## 1. One\n\n```text\nout\n```\n",
			wantErr: "line 3: an output block after no command block of its step",
		},
		"two outputs for one command": {
			doc:     "## 1. One\n\n```sh\na\n```\n\n```text\nout\n```\n\n```text\nmore\n```\n",
			wantErr: "line 11: an output block after no command block of its step",
		},
		"an output in the next step": {
			doc:     "## 1. One\n\n```sh\na\n```\n\n## 2. Two\n\n```text\nout\n```\n",
			wantErr: "line 9: an output block after no command block of its step",
		},
		"a gap in the numbers": {
			doc:     "## 1. One\n\n## 3. Three\n",
			wantErr: "line 3: step 3, want step 2",
		},
		"no steps": {
			doc:     "# T\n\n```sh\na\n```\n",
			wantErr: "no ```sh block under a numbered step",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parsePage(tc.doc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("blocks %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i].step != tc.want[i].step || got[i].line != tc.want[i].line || got[i].command != tc.want[i].command ||
					!slices.Equal(got[i].output, tc.want[i].output) || got[i].outputLine != tc.want[i].outputLine {
					t.Errorf("block %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// What varies between runs is set aside; what the page says is not.
func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"local cluster is up (pid 28733)\n  kubeconfig: /tmp/view-1/.local/kubeconfig\n": "local cluster is up (pid <pid>)\n  kubeconfig: ~/inplace/.local/kubeconfig",
		"sim-0    Ready    <none>   1s    \nsim-10   Ready    <none>   12m   ":           "sim-0 Ready <none> <age>\nsim-10 Ready <none> <age>",
		"kubectl-inplace v0.9.0 (commit 1c7377d12d63, go1.26.8 linux/amd64)":             "kubectl-inplace v0.9.0 (commit <commit>, go<version> <os>/<arch>)",
		"train-workers-0-1-4wmj8   2/2     Running   2 (1s ago)   4s":                    "train-workers-0-1-<suffix> 2/2 Running 2 (<age> ago) <age>",
		// A suffix that reads as an age is a suffix.
		"pod/train-workers-1-0-29h7s condition met":                                    "pod/train-workers-1-0-<suffix> condition met",
		"reports  to the controller's leader at 127.0.0.1:45869 (Pods carry no epoch)": "reports to the controller's leader at <address> (Pods carry no epoch)",
		// Either sign of one failure.
		"in-place restart 1: container trainer of Pod train-workers-0-0-m4zqr exited; epoch 1 deprecated":   "in-place restart 1: <failure of train-workers-0-0-<suffix>>; epoch 1 deprecated",
		"in-place restart 1: the agent of Pod train-workers-0-0-m4zqr moved to epoch 2; epoch 1 deprecated": "in-place restart 1: <failure of train-workers-0-0-<suffix>>; epoch 1 deprecated",
		// Counts, epochs and versions stay.
		"restarts 1 (1 in place; 1 of maxRestarts 10 counted)\nepochs   synced 2  deprecated 1": "restarts 1 (1 in place; 1 of maxRestarts 10 counted)\nepochs synced 2 deprecated 1",
		">> kubernetes binaries v1.36.4 are up to date in /tmp/view-1/bin":                      ">> kubernetes binaries v1.36.4 are up to date in ~/inplace/bin",
		// The timeline's rows after the first, in either order.
		"last in-place restart\n" +
			"  13:02:47.143  +0.000s         failure seen\n" +
			"  13:02:47      +0.000..0.857s  every worker running (last worker start)\n" +
			"  13:02:47.276  +0.133s         every Pod at the new epoch: barriers lifted\n" +
			"  13:02:47      +0.000..0.857s  every agent restarted (last agent start)\n": "last in-place restart\n" +
			"  <time> +<offset> failure seen\n" +
			"  <time> +<offset> every Pod at the new epoch: barriers lifted\n" +
			"  <time> +<offset> every agent restarted (last agent start)\n" +
			"  <time> +<offset> every worker running (last worker start)",
	} {
		if got := strings.Join(normalize(in, "/tmp/view-1"), "\n"); got != want {
			t.Errorf("normalize(%q)\n = %q\nwant %q", in, got, want)
		}
	}
}

func TestMatchLines(t *testing.T) {
	for _, tc := range []struct {
		want, got string
		match     bool
	}{
		{"a\nb", "a\nb", true},
		{"a\nb", "a\nc", false},
		{"a\nb", "a\nb\nc", false},
		{"a\nb\nc", "a\nb", false},
		{"a\n...\nd", "a\nb\nc\nd", true},
		{"a\n...\nd", "a\nd", true},
		{"a\n...\nd", "a\nb\nc", false},
		{"...\nc", "a\nb\nc", true},
		{"a\n...", "a\nb\nc", true},
		{"...\nb\n...", "a\nb\nc", true},
		{"...\nx\n...", "a\nb\nc", false},
	} {
		if got := matchLines(strings.Split(tc.want, "\n"), strings.Split(tc.got, "\n")); got != tc.match {
			t.Errorf("matchLines(%q, %q) = %v, want %v", tc.want, tc.got, got, tc.match)
		}
	}
}

func TestFirstDifference(t *testing.T) {
	for _, tc := range []struct{ want, got, diff string }{
		{"a\nb", "a\nb", ""},
		{"a\nb", "a\nc", `the page shows "b", the run printed "c"`},
		{"a\n...\nd\ne", "a\nb\nd\nf", `the page shows "e", the run printed "f"`},
		{"a\nb", "a", `the page shows "b", the run printed nothing more`},
		{"a", "a\nb", `the page shows nothing more, the run printed "b"`},
		{"a\n...", "a\nb", ""},
	} {
		if got := firstDifference(strings.Split(tc.want, "\n"), strings.Split(tc.got, "\n")); got != tc.diff {
			t.Errorf("firstDifference(%q, %q) = %q, want %q", tc.want, tc.got, got, tc.diff)
		}
	}
}

func TestSamePods(t *testing.T) {
	onPage, same, recreated := podNames{}, podNames{}, podNames{}
	onPage.add("pod/train-workers-0-0-m4zqr annotated\ntrain-workers-0-0-m4zqr 2/2 Running")
	same.add("pod/train-workers-0-0-x2b9z annotated\ntrain-workers-0-0-x2b9z 2/2 Running")
	recreated.add("pod/train-workers-0-0-x2b9z annotated\ntrain-workers-0-0-q7k4d 2/2 Running")
	if diff := samePods(onPage, same); len(diff) != 0 {
		t.Errorf("one Pod under one name: %v", diff)
	}
	if diff := samePods(onPage, recreated); len(diff) != 1 {
		t.Errorf("a Pod recreated where the page keeps it: %v, want one difference", diff)
	}
}
