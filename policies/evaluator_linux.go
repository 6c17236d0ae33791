package policies

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// endWithParent makes the kernel end the evaluator with the engine's
// process, whatever ends it. The kernel ties the signal to the thread that
// started the child (golang/go#27505): the Go runtime ends a thread only
// when a goroutine locked to it exits locked, which the engine's callers
// do not do; a child ended early so fails one evaluation, and the next
// starts another.
func endWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// residentBytes is a process's resident memory.
func residentBytes(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(raw))
	if len(fields) < 2 {
		return 0, fmt.Errorf("statm: %q", raw)
	}
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	return pages * int64(os.Getpagesize()), err
}

// preferToBeKilled makes the kernel, short of memory in the container,
// end this process (an evaluator) before the engine's: raising one's own
// score needs no privilege.
func preferToBeKilled() {
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
}
