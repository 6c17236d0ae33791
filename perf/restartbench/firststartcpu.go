package restartbench

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FirstStartCPU is the CPU time the whole machine spent while a JobSet
// started on the real nodes, from its creation until it was steady, and
// who spent it. A first start on this machine is bound by its cores when
// Busy is close to Window × Cores: then every CPU-second one strategy adds
// over another is wall time its workers wait for.
type FirstStartCPU struct {
	Window time.Duration `json:"windowNanos"`
	Cores  int           `json:"cores"`
	// Busy is what all the cores spent on anything but idling or waiting
	// for I/O (/proc/stat), in seconds.
	Busy float64 `json:"busySeconds"`
	// Processes are the local cluster's daemons by group ("control
	// plane", "kubelets", "containerds") and this process ("manager": the
	// manager, its webhook and the benchmark), in seconds.
	Processes map[string]float64 `json:"processSeconds"`
	// Children are what the children each group waited for used (a
	// containerd's CNI plugins, a kubelet's mounts), in seconds.
	Children map[string]float64 `json:"childSeconds"`
	// Shims are the containerd shims started for the JobSet's Pods, with
	// the runc calls they waited for, in seconds.
	Shims float64 `json:"shimSeconds"`
	// Containers are the JobSet's containers by role (the container's
	// cgroup): "agent", "sidecar", "workers" (supervisors included),
	// "sandbox" (each Pod's pause container), in seconds.
	Containers map[string]float64 `json:"containerSeconds"`
	// Others are the machine's other processes by command name (kernel
	// workers by kind): what the rest of Busy went to, as far as the
	// processes alive at the end tell, in seconds.
	Others map[string]float64 `json:"otherSeconds,omitempty"`
}

// Container roles in a FirstStartCPU.
const (
	roleAgent   = "agent"
	roleSidecar = "sidecar"
	roleWorkers = "workers"
	roleSandbox = "sandbox"
)

// cpuMark is what is read when a JobSet is created: the machine's busy
// time, every process's, and the shims already running (theirs belong to
// earlier JobSets).
type cpuMark struct {
	at      time.Time
	busy    time.Duration
	daemons map[string]ProcStat
	shims   map[int]bool
	all     map[int]time.Duration
}

func (e *env) markCPU() cpuMark {
	busy, _ := machineBusy()
	m := cpuMark{at: time.Now(), busy: busy, daemons: e.daemonCPU(), shims: map[int]bool{}, all: allProcessCPU()}
	for _, pid := range shimPIDs() {
		m.shims[pid] = true
	}
	return m
}

// Groups of the cluster's daemons in a FirstStartCPU.
const (
	groupControlPlane = "control plane"
	// groupManager is this process: on real nodes it runs the manager
	// and the benchmark, and the agents run in their Pods.
	groupManager     = "manager"
	groupKubelets    = "kubelets"
	groupContainerds = "containerds"
)

// daemonCPU sums the CPU times of the cluster's daemons and this process
// by group.
func (e *env) daemonCPU() map[string]ProcStat {
	out := map[string]ProcStat{}
	for name, pid := range e.cpu.pids {
		st, err := ReadProcStat(pid)
		if err != nil {
			continue
		}
		group := groupControlPlane
		switch {
		case name == ProcessBench:
			group = groupManager
		case strings.HasSuffix(name, "-kubelet"):
			group = groupKubelets
		case strings.HasSuffix(name, "-containerd"):
			group = groupContainerds
		}
		sum := out[group]
		sum.CPU += st.CPU
		sum.ReapedChild += st.ReapedChild
		out[group] = sum
	}
	return out
}

// firstStartCPU is what the machine spent since mark on the JobSet in
// namespace ns. The JobSet's containers are read from their cgroups,
// which count from their creation: the JobSet is new, so all of it is in
// the window.
func (e *env) firstStartCPU(ctx context.Context, ns string, strategy Strategy, mark cpuMark) (*FirstStartCPU, error) {
	busy, err := machineBusy()
	if err != nil {
		return nil, err
	}
	out := &FirstStartCPU{Window: time.Since(mark.at), Cores: runtime.NumCPU(), Busy: (busy - mark.busy).Seconds(),
		Processes: map[string]float64{}, Children: map[string]float64{}, Containers: map[string]float64{}}
	for group, now := range e.daemonCPU() {
		before := mark.daemons[group]
		out.Processes[group] = (now.CPU - before.CPU).Seconds()
		out.Children[group] = (now.ReapedChild - before.ReapedChild).Seconds()
	}
	for _, pid := range shimPIDs() {
		if mark.shims[pid] {
			continue
		}
		if st, err := ReadProcStat(pid); err == nil {
			out.Shims += (st.CPU + st.ReapedChild).Seconds()
		}
	}
	out.Others = e.otherProcesses(mark.all)
	var pods corev1.PodList
	if err := e.client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	usage, err := cgroupUsage(e.cluster.CgroupRoots())
	if err != nil {
		return nil, err
	}
	for _, pod := range pods.Items {
		total, ok := usage["pod"+string(pod.UID)]
		if !ok {
			return nil, fmt.Errorf("pod %s: no cgroup below the real nodes' roots", pod.Name)
		}
		statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
		for _, cs := range statuses {
			_, id, _ := strings.Cut(cs.ContainerID, "://")
			used, ok := usage[id]
			if id == "" || !ok {
				continue // not started, or gone: its time stays in the sandbox's
			}
			role := roleWorkers
			switch cs.Name {
			case strategy.agentContainer():
				role = roleAgent
			case idleSidecarName:
				role = roleSidecar
			}
			out.Containers[role] += used.Seconds()
			total -= used
		}
		out.Containers[roleSandbox] += total.Seconds()
	}
	return out, nil
}

// otherProcesses is the CPU time each process alive now used since
// before, by command name, leaving out what a FirstStartCPU counts
// elsewhere: the cluster's daemons, this process, the shims, and every
// process in a real node's cgroup.
func (e *env) otherProcesses(before map[int]time.Duration) map[string]float64 {
	known := map[int]bool{}
	for _, pid := range e.cpu.pids {
		known[pid] = true
	}
	roots := e.cluster.CgroupRoots()
	out := map[string]float64{}
	for pid, cpu := range allProcessCPU() {
		used := cpu - before[pid]
		if known[pid] || used <= 0 {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		if strings.HasPrefix(name, "containerd-shim") || inCgroups(pid, roots) {
			continue
		}
		// kworker/1:2-events, ksoftirqd/0: by kind, not by CPU.
		name, _, _ = strings.Cut(name, "/")
		out[name] += used.Seconds()
	}
	return out
}

// inCgroups reports whether a process runs below one of the cgroup roots.
func inCgroups(pid int, roots []string) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	for _, root := range roots {
		if strings.Contains(string(raw), root+"/") {
			return true
		}
	}
	return false
}

// allProcessCPU is every process's own CPU time (user and system).
func allProcessCPU() map[int]time.Duration {
	entries, _ := os.ReadDir("/proc")
	out := map[int]time.Duration{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := ReadProcStat(pid); err == nil {
			out[pid] = st.CPU
		}
	}
	return out
}

// machineBusy is the time all CPUs spent busy since boot: the first line
// of /proc/stat, every field but idle and iowait (guest time is in user
// time already).
func machineBusy() (time.Duration, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	return parseMachineBusy(line)
}

func parseMachineBusy(line string) (time.Duration, error) {
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, fmt.Errorf("malformed /proc/stat line %q", line)
	}
	var busy int64
	// user nice system idle iowait irq softirq steal
	for i, f := range fields[1:9] {
		if i == 3 || i == 4 {
			continue
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat field %q: %w", f, err)
		}
		busy += v
	}
	return time.Duration(busy) * clockTick, nil
}

// shimPIDs are the running containerd shims (their command name, cut to
// 15 bytes by the kernel, is "containerd-shim").
func shimPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(comm)), "containerd-shim") {
			out = append(out, pid)
		}
	}
	return out
}

// cgroupUsage reads cpuacct.usage of every cgroup below the given roots in
// the cpuacct hierarchy, by the cgroup's own name: "pod<uid>" for a Pod,
// the container's ID for a container (the kubelet's cgroupfs layout).
func cgroupUsage(roots []string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, root := range roots {
		dir := filepath.Join("/sys/fs/cgroup/cpuacct", root)
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil // removed while walked: a container of an earlier JobSet
				}
				return err
			}
			if !d.IsDir() {
				return nil
			}
			raw, err := os.ReadFile(filepath.Join(path, "cpuacct.usage"))
			if err != nil {
				return nil
			}
			ns, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			out[d.Name()] = time.Duration(ns)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Columns of a first start's CPU split, in the order printed.
var firstStartCPUColumns = []string{groupControlPlane, groupManager, groupKubelets, groupContainerds, columnChildren, columnShims, roleSandbox, roleAgent, roleSidecar, roleWorkers, columnOther}

const (
	columnChildren = "their children"
	columnShims    = "shims"
	columnOther    = "other"
)

// byColumn splits Busy by firstStartCPUColumns: "their children" are the
// daemons' children, "other" what no column accounts for (the machine's
// other processes, and those that ended unwaited).
func (c *FirstStartCPU) byColumn() map[string]float64 {
	out := map[string]float64{columnShims: c.Shims}
	for group, s := range c.Processes {
		out[group] += s
	}
	for _, s := range c.Children {
		out[columnChildren] += s
	}
	for role, s := range c.Containers {
		out[role] += s
	}
	accounted := 0.0
	for _, s := range out {
		accounted += s
	}
	out[columnOther] = c.Busy - accounted
	return out
}

// split prints the columns that are not zero, as "name 1.2 s".
func (c *FirstStartCPU) split() string {
	cols := c.byColumn()
	var parts []string
	for _, name := range firstStartCPUColumns {
		if s := cols[name]; s != 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f s", name, s))
		}
	}
	if top := topOthers(c.Others, 3); top != "" {
		parts = append(parts, "of which "+top)
	}
	return strings.Join(parts, ", ")
}

// topOthers names the n other processes that used the most CPU, as
// "(kworker 1.2 s, systemd 0.3 s)".
func topOthers(others map[string]float64, n int) string {
	names := slices.Collect(maps.Keys(others))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(others[b], others[a]) })
	var parts []string
	for _, name := range names[:min(n, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.1f s", name, others[name]))
	}
	if len(parts) == 0 {
		return ""
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// waitPodsTornDown waits until no real node keeps the cgroup of a Pod the
// API server no longer has. Removing a Pod's cgroup is the kubelet's last
// step of its teardown: once none is left, no core still works on an
// earlier JobSet's Pods, and a first start's CPU account counts its own
// work only.
func (e *env) waitPodsTornDown(ctx context.Context, timeout time.Duration) error {
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := e.client.List(ctx, &pods); err != nil {
			return false, nil
		}
		live := map[string]bool{}
		for _, p := range pods.Items {
			live["pod"+string(p.UID)] = true
		}
		usage, err := cgroupUsage(e.cluster.CgroupRoots())
		if err != nil {
			return false, err
		}
		left = left[:0]
		for name := range usage {
			if strings.HasPrefix(name, "pod") && !live[name] {
				left = append(left, name)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the real nodes still hold the cgroups of %d deleted Pods (%v): %w", len(left), left, err)
	}
	return nil
}
