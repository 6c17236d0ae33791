package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inplace-dev/inplace/test/cluster"
)

// The policy guide reads as the files and commands the suite runs. The
// numbers change with the page's steps, and only with them.
func TestWriteAPolicySteps(t *testing.T) {
	repo, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(repo, "docs", writeAPolicy))
	if err != nil {
		t.Fatal(err)
	}
	s, err := steps(string(page))
	if err != nil {
		t.Fatal(err)
	}
	files, commands := 0, 0
	for _, s := range s {
		if s.file != "" {
			files++
		} else {
			commands++
		}
	}
	if files != 7 || commands != 14 {
		t.Errorf("docs/%s: %d files and %d commands, want 7 and 14", writeAPolicy, files, commands)
	}
}

func TestSteps(t *testing.T) {
	for name, tc := range map[string]struct {
		page    string
		want    []step
		wantErr string
	}{
		"files, commands, their outputs and exit statuses; other blocks are left alone": {
			page: "# Guide\n\n1. Write the policy, `guardrails/p.rego`:\n\n   ```rego\n   package p\n   ```\n\n" +
				"2. Apply it:\n\n   ```sh\n   kubectl apply -f guardrails/\n   ```\n\n   ```\n   created\n   ```\n\n" +
				"```yaml\nkind: X\n```\n\n```sh\nkubectl apply -f x.yaml\n```\n\nIt prints the denial and exits 1:\n\n```\nError: denied\n```\n",
			want: []step{
				{line: 5, file: "guardrails/p.rego", text: "package p\n"},
				{line: 11, command: "kubectl apply -f guardrails/\n", output: "created\n"},
				{line: 23, command: "kubectl apply -f x.yaml\n", output: "Error: denied\n", exit: 1},
			},
		},
		"a command without its output": {
			page:    "```sh\nls\n```\n\n```yaml\nkind: X\n```\n",
			wantErr: "line 1: the command is not followed by the output it prints",
		},
		"a block that does not end": {
			page:    "```sh\nls\n```\n\n```\nfile\n",
			wantErr: "line 5: a code block that does not end",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := steps(tc.page)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(step{})); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
		})
	}
}
