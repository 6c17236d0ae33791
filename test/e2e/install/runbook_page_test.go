package install

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inplace-dev/inplace/test/cluster"
)

// The runbook reads as the command blocks the drill runs, without a
// cluster. The number changes with the page's commands, and only with
// them.
func TestRunbookBlocks(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "how-to", "operate.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := runbookBlocks(string(page))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 50 {
		t.Errorf("docs/how-to/operate.md: %d command blocks, want 50", len(blocks))
	}
	for _, b := range blocks {
		if b.section == "" {
			t.Errorf("docs/how-to/operate.md: %q is under no section", b.script)
		}
	}

	got, err := runbookBlocks("# Runbook\n\n## Alerts\n\n### Restart alerts\n\n```sh\ninplacectl status NAME \\\n  -n NAMESPACE\n```\n\n```text\n## not a section\n```\n\n" +
		"## The webhook is down\n\n1. Check:\n\n   ```sh\n   kubectl get pods\n   ```\n\n   ```yaml\n   kind: X\n   ```\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []runbookBlock{
		{section: "Alerts", script: "inplacectl status NAME \\\n  -n NAMESPACE"},
		{section: "The webhook is down", script: "kubectl get pods"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(runbookBlock{})); diff != "" {
		t.Errorf("runbookBlocks (-want +got):\n%s", diff)
	}

	if _, err := runbookBlocks("## Alerts\n\n```sh\nkubectl get pods\n"); err == nil || err.Error() != "line 3: a code block that does not end" {
		t.Errorf("a block that does not end: error %v", err)
	}
}
