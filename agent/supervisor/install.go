package supervisor

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Install copies the running binary to dest, executable by every user,
// whole or not at all: the agent container's postStart hook runs it to
// put the supervisor on the volume the worker containers mount. A rename
// replaces dest: supervisors running the previous copy (the agent
// restarted alone) keep it.
func Install(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".install-*")
	if err != nil {
		return fmt.Errorf("installing the supervisor: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("installing the supervisor: %w", err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}
