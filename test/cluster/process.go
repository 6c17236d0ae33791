package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
)

// process is one control plane component running as a child process with its
// own log file.
type process struct {
	name string
	cmd  *exec.Cmd
	// env is what was added to this process's environment, for a restart.
	env     []string
	logPath string
	done    chan struct{}
	err     error // set when done is closed
	// stopped is set when a test stopped the process on purpose (a node's
	// kubelet, to lose the node): its exit is then no failure.
	stopped atomic.Bool
}

// startProcess starts binary with args and env added to this process's
// environment, logging stdout and stderr to <logDir>/<name>.log. The child
// is killed by the kernel if this process dies (Pdeathsig), so that an
// interrupted or crashed test leaves no component running; a real node's
// shims and containers outlive it, and the next real-node cluster's start
// undoes them.
func startProcess(name, binary string, args, env []string, logDir string) (*process, error) {
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("%s binary missing at %s (run 'make cluster-binaries'): %w", name, binary, err)
	}
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, env: env, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, with its error.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM, waits up to grace, then kills.
func (p *process) stop(grace time.Duration) {
	if done, _ := p.exited(); done {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitFor polls check every interval until it succeeds, the process exits or
// ctx ends. The returned error names the component and its log file.
func (p *process) waitFor(ctx context.Context, what string, check func(context.Context) error) error {
	var last error
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before %s (%v); see %s", p.name, what, p.err, p.logPath) //nolint:errorlint // p.err is nil after an exit with status 0
		case <-ctx.Done():
			return fmt.Errorf("%s: timed out waiting for %s: %w (last error: %v); see %s", p.name, what, ctx.Err(), last, p.logPath) //nolint:errorlint // last is nil if the check never ran
		case <-ticker.C:
		}
	}
}

// FreePorts reserves n distinct free TCP ports on 127.0.0.1. The listeners
// are held until all ports are chosen so that the same port is not returned
// twice; a port can still be taken by another process before the component
// binds it, which the caller detects as a start failure.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(errors.New("finding a free port"), err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
