//go:build !linux

package policies

import (
	"errors"
	"os/exec"
)

// Elsewhere than Linux (inplacectl on a workstation, which evaluates in
// its own process), an evaluator is not tied to its parent, and its
// memory is not read: IsolationOptions.MemoryLimit is not enforced, only
// the time limit ends an evaluator.

func endWithParent(*exec.Cmd) {}

func preferToBeKilled() {}

func residentBytes(int) (int64, error) {
	return 0, errors.New("resident memory is read on Linux only")
}
