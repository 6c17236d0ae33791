package app

import (
	"strings"
	"testing"
)

// The check itself runs against a real API server in
// test/integration/migration; here, the command's wiring.
func TestMigrateCommand(t *testing.T) {
	code, out, _ := run(t, "migrate", "--help")
	if code != 0 || !strings.Contains(out, "--upstream-namespace") || !strings.Contains(out, "docs/how-to/migrate-from-jobset.md") {
		t.Errorf("migrate --help: exit %d, printed:\n%s", code, out)
	}
	if code, _, _ := run(t, "migrate", "extra"); code != 2 {
		t.Errorf("migrate with an argument: exit %d, want 2", code)
	}
}
