package restartbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ProcessBench names this process in CPU accounts: inplace-manager, the
// simulated kubelets and every agent run in it.
const ProcessBench = "manager+nodes+agents"

// clockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// cpuAccount reads the CPU time of every process of the local cluster and
// of this one, so that a restart's cost can be split by process.
type cpuAccount struct {
	pids map[string]int
}

func newCPUAccount(clusterPIDs map[string]int) *cpuAccount {
	pids := map[string]int{ProcessBench: os.Getpid()}
	for name, pid := range clusterPIDs {
		pids[name] = pid
	}
	return &cpuAccount{pids: pids}
}

// ProcessNodes names the real nodes' kubelets and containerds together in
// CPU accounts (their containers and shims are not counted).
const ProcessNodes = "kubelets+containerd"

// snapshot returns each process's CPU time (user and system) so far, the
// real nodes' processes summed. A process whose times cannot be read is
// left out.
func (a *cpuAccount) snapshot() map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, pid := range a.pids {
		d, err := processCPU(pid)
		if err != nil {
			continue
		}
		if g := groupOf(name); g == groupKubelets || g == groupContainerds {
			name = ProcessNodes
		}
		out[name] += d
	}
	return out
}

// since is the CPU seconds each process used since an earlier snapshot.
func (a *cpuAccount) since(before map[string]time.Duration) map[string]float64 {
	out := map[string]float64{}
	for name, d := range a.snapshot() {
		if b, ok := before[name]; ok {
			out[name] = (d - b).Seconds()
		}
	}
	return out
}

// load is the cores each process keeps busy (CPU-seconds per second) over
// the window from now.
func (a *cpuAccount) load(ctx context.Context, window time.Duration) (map[string]float64, error) {
	from, before := time.Now(), a.snapshot()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(window):
	}
	out := a.since(before)
	elapsed := time.Since(from).Seconds()
	for process, seconds := range out {
		out[process] = seconds / elapsed
	}
	return out, nil
}

// processCPU reads utime + stime of a process from /proc/<pid>/stat.
func processCPU(pid int) (time.Duration, error) {
	st, err := ReadProcStat(pid)
	return st.CPU, err
}

// ProcStat is what /proc/<pid>/stat says of a process: its parent, and
// its CPU time (user and system), and that of the children it has waited
// for.
type ProcStat struct {
	// Comm is the command name, as the kernel keeps it (15 bytes at most).
	Comm string
	PPID int
	// Started is when the process started, in clock ticks since boot:
	// with the pid, it names one process (a pid is reused, and a kernel
	// worker's command name changes with its work).
	Started     int64
	CPU         time.Duration
	ReapedChild time.Duration
}

// ReadProcStat reads /proc/<pid>/stat.
func ReadProcStat(pid int) (ProcStat, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcStat{}, err
	}
	return parseStat(string(raw))
}

// parseStatCPU reads fields 14 and 15 (utime, stime) of a stat line.
func parseStatCPU(stat string) (time.Duration, error) {
	st, err := parseStat(stat)
	return st.CPU, err
}

// parseStat reads fields 2 (comm), 4 (ppid), 14 and 15 (utime, stime), 16 and 17
// (cutime, cstime) and 22 (starttime) of a stat line. The command name (field 2) may hold
// spaces and parentheses, so fields are counted after its last ')'.
func parseStat(stat string) (ProcStat, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return ProcStat{}, fmt.Errorf("malformed stat line %q", stat)
	}
	// After ')': field 3 (state) is the first; utime is field 14.
	fields := strings.Fields(stat[end+1:])
	if len(fields) < 20 {
		return ProcStat{}, fmt.Errorf("stat line has %d fields after the command, want at least 20", len(fields))
	}
	var n [6]int64
	for i, f := range []string{fields[1], fields[11], fields[12], fields[13], fields[14], fields[19]} {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return ProcStat{}, fmt.Errorf("stat field %q: %w", f, err)
		}
		n[i] = v
	}
	var comm string
	if start := strings.IndexByte(stat, '('); start >= 0 && start < end {
		comm = stat[start+1 : end]
	}
	return ProcStat{Comm: comm, PPID: int(n[0]), Started: n[5], CPU: time.Duration(n[1]+n[2]) * clockTick, ReapedChild: time.Duration(n[3]+n[4]) * clockTick}, nil
}

// startProfile writes a CPU profile of this process (inplace-manager, the
// simulated kubelets and the agents, told apart by the profile label
// "actor") for one restart into the env's profile directory, if it has
// one. The returned stop is safe to call more than once.
func (e *env) startProfile(r Result, restart int) (stop func(), err error) {
	if e.profileDir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(e.profileDir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(e.profileDir, fmt.Sprintf("restart-%d-%s-%s-%d.pprof", r.Nodes, strings.ReplaceAll(r.Strategy, "/", "-"), r.Failure, restart))
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("profiling: %w", err)
	}
	// The API server's own profile, over a fixed time from the failure (its
	// handler cannot be stopped early).
	apiserverDone := make(chan error, 1)
	if e.apiserverProfile > 0 {
		go func() {
			apiserverDone <- e.fetchAPIServerProfile(strings.TrimSuffix(path, ".pprof") + ".kube-apiserver.pprof")
		}()
	} else {
		apiserverDone <- nil
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
			if err := <-apiserverDone; err != nil {
				e.log.Error(err, "profiling the API server")
			}
		})
	}, nil
}

func (e *env) fetchAPIServerProfile(path string) error {
	seconds := strconv.Itoa(max(1, int(e.apiserverProfile.Seconds())))
	raw, err := e.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", seconds).
		Timeout(e.apiserverProfile + time.Minute).DoRaw(context.Background())
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}
