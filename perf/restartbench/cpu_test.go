package restartbench

import (
	"os"
	"syscall"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// utime 250 and stime 50 ticks, after a command name with spaces and
	// a parenthesis.
	line := "4242 (kube apiserver) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
	got, err := parseStatCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * time.Second; got != want {
		t.Errorf("CPU time %v, want %v", got, want)
	}
	if st, err := parseStat(line); err != nil || st.Comm != "kube apiserver) x" || st.Started != 100 {
		t.Errorf("command %q started at %d (%v), want the name between the first '(' and the last ')', started at tick 100", st.Comm, st.Started, err)
	}
	if _, err := parseStatCPU("4242 (truncated) S 1 2"); err == nil {
		t.Error("a truncated stat line was accepted")
	}
}

func TestCPUAccountSeesThisProcessWork(t *testing.T) {
	a := newCPUAccount(nil)
	before := a.snapshot()
	if _, ok := before[ProcessBench]; !ok {
		t.Fatalf("no CPU time read for this process (pid %d)", os.Getpid())
	}
	deadline := time.Now().Add(200 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	if got := a.since(before)[ProcessBench]; got < 0.05 {
		t.Errorf("200 ms of busy loop counted as %.3f CPU seconds", got)
	}
}

func TestEnsureFileLimit(t *testing.T) {
	if err := ensureFileLimit(10); err != nil {
		t.Fatalf("ten Pods: %v", err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if want := uint64(fdsPerPod*10 + fdsSpare); lim.Cur < want {
		t.Errorf("open-file limit %d after ensuring %d", lim.Cur, want)
	}
}
