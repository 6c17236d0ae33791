package main

import (
	"io"
	"os/exec"
	"testing"
	"time"
)

// startChild starts a process that lives until its stdin is closed, and
// returns it with the pipe that ends it.
func startChild(t *testing.T) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "read -r _ || true")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, stdin
}

func TestWatchProcess(t *testing.T) {
	cmd, stdin := startChild(t)
	gone, err := watchProcess(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}

	// Alive: the watch does not fire.
	select {
	case <-gone:
		t.Fatalf("the watch of process %d fired while it runs", cmd.Process.Pid)
	case <-time.After(500 * time.Millisecond):
	}

	// Exited (and not yet reaped): it fires.
	stdin.Close()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatalf("the watch of process %d did not fire within 10s of its exit", cmd.Process.Pid)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the child: %v", err)
	}
}

func TestWatchProcessGone(t *testing.T) {
	cmd, stdin := startChild(t)
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the child: %v", err)
	}
	// Reaped: no such process any more (its id is not reused this soon).
	gone, err := watchProcess(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatalf("the watch of process %d, reaped, did not fire within 10s", cmd.Process.Pid)
	}
}

func TestOwnerFromEnv(t *testing.T) {
	for _, tc := range []struct {
		value   string
		pid     int
		wantErr bool
	}{
		{value: "", pid: 0},
		{value: "42", pid: 42},
		{value: "0", wantErr: true},
		{value: "-1", wantErr: true},
		{value: "self", wantErr: true},
	} {
		t.Setenv(ownerEnv, tc.value)
		pid, err := ownerFromEnv()
		if (err != nil) != tc.wantErr || pid != tc.pid {
			t.Errorf("%s=%q: got %d, %v; want %d, error %v", ownerEnv, tc.value, pid, err, tc.pid, tc.wantErr)
		}
	}
}
