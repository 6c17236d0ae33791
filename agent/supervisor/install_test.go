package supervisor

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestInstallCopiesItselfWhole: the copy is this binary, executable by
// every user, replaces an earlier one (an agent restarted alone), and
// leaves no temporary file beside it.
func TestInstallCopiesItselfWhole(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "inplace-supervisor")
	if err := os.WriteFile(dest, []byte("an earlier copy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Install(dest); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the copy (%d bytes) is not the running binary (%d bytes)", len(got), len(want))
	}
	fi, err := os.Stat(dest)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", fi.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("files left in the volume: %v, want only the copy", entries)
	}
}

// TestInstallFailsWithoutItsDirectory: an error, not a copy elsewhere.
func TestInstallFailsWithoutItsDirectory(t *testing.T) {
	if err := Install(filepath.Join(t.TempDir(), "missing", "inplace-supervisor")); err == nil {
		t.Fatal("installed into a directory that does not exist")
	}
}
