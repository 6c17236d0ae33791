package restartbench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
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
// who spent it.
type FirstStartCPU struct {
	Window time.Duration `json:"windowNanos"`
	// Cores are the machine's online CPUs.
	Cores int `json:"cores"`
	// Busy is what all the cores spent running anything: user, nice,
	// system and interrupt time (/proc/stat), not idle, I/O wait or the
	// time the hypervisor gave to others, in seconds.
	Busy float64 `json:"busySeconds"`
	// Daemons are the local cluster's daemons by group ("control plane",
	// "kubelets", "containerds") and this process ("manager": the
	// manager, its webhook and the benchmark), in seconds.
	Daemons map[string]float64 `json:"daemonSeconds"`
	// ReapedChildren are what the children each group waited for used
	// (a containerd's CNI plugins and its shims' start processes, a
	// kubelet's mounts), in seconds.
	ReapedChildren map[string]float64 `json:"reapedChildSeconds"`
	// Shims are the containerd shims started for the JobSet's Pods, with
	// the runc calls they waited for, in seconds. A shim also reaps its
	// containers' processes that end (a postStart hook's exec): their time
	// is then in the container's cgroup too.
	Shims float64 `json:"shimSeconds"`
	// Containers are the JobSet's containers by role (the container's
	// cgroup): "agent", "sidecar", "workers" (supervisors included), and
	// "sandbox": the rest of each Pod's cgroup (its pause container, and
	// any container that is no longer running), in seconds.
	Containers map[string]float64 `json:"containerSeconds"`
	// Others are the machine's other processes by command name (kernel
	// workers by kind), as far as the processes alive at the end tell, in
	// seconds.
	Others map[string]float64 `json:"otherSeconds"`
	// PodsUnread counts the JobSet's Pods whose cgroup was not found (a
	// Pod replaced or gone): their containers are in no role.
	PodsUnread int `json:"podsUnread,omitempty"`
}

// Container roles in a FirstStartCPU.
const (
	roleAgent   = "agent"
	roleSidecar = "sidecar"
	roleWorkers = "workers"
	roleSandbox = "sandbox"
)

// Groups of the cluster's daemons in a FirstStartCPU.
const (
	groupControlPlane = "control plane"
	// groupManager is this process: on real nodes it runs the manager
	// and the benchmark, and the agents run in their Pods.
	groupManager     = "manager"
	groupKubelets    = "kubelets"
	groupContainerds = "containerds"
)

// cpuV1Accounting is where cgroup v1 mounts its cpuacct hierarchy.
const cpuV1Accounting = "/sys/fs/cgroup/cpuacct"

// cpuMark is what is read just before a JobSet is created: every process,
// and then the machine's busy time.
type cpuMark struct {
	at        time.Time
	processes map[int]ProcStat
	busy      time.Duration
	err       error
}

// markCPU reads the machine's processes and busy time. The busy time is
// read last, here and at the end: both windows then have the same length.
func markCPU() cpuMark {
	m := cpuMark{at: time.Now(), processes: readProcesses()}
	m.busy, _, m.err = machineBusy()
	return m
}

// firstStartCPU is what the machine spent since mark on the JobSet in
// namespace ns. The JobSet's containers are read from their cgroups,
// which count from their creation: the JobSet is new, so all of it is in
// the window.
func (e *env) firstStartCPU(ctx context.Context, ns string, strategy Strategy, mark cpuMark) (*FirstStartCPU, error) {
	if mark.err != nil {
		return nil, mark.err
	}
	// The request first: every counter is read after it, in as short a
	// time as can be.
	var pods corev1.PodList
	if err := e.client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	window := time.Since(mark.at)
	processes := readProcesses()
	usage, err := cgroupUsage(cpuV1Accounting, e.cluster.CgroupRoots())
	if err != nil {
		return nil, err
	}
	busy, cores, err := machineBusy()
	if err != nil {
		return nil, err
	}
	out := &FirstStartCPU{Window: window, Cores: cores, Busy: (busy - mark.busy).Seconds(),
		Daemons: map[string]float64{}, ReapedChildren: map[string]float64{}, Containers: map[string]float64{}, Others: map[string]float64{}}
	daemons := map[int]string{}
	for name, pid := range e.cpu.pids {
		daemons[pid] = groupOf(name)
	}
	roots := e.cluster.CgroupRoots()
	for pid, now := range processes {
		before, existed := mark.processes[pid]
		if existed && before.Started != now.Started {
			existed, before = false, ProcStat{} // the pid was reused
		}
		switch {
		case daemons[pid] != "":
			out.Daemons[daemons[pid]] += (now.CPU - before.CPU).Seconds()
			out.ReapedChildren[daemons[pid]] += (now.ReapedChild - before.ReapedChild).Seconds()
		case strings.HasPrefix(now.Comm, "containerd-shim"):
			if !existed { // older shims serve earlier JobSets
				out.Shims += (now.CPU + now.ReapedChild).Seconds()
			}
		default:
			used := now.CPU - before.CPU
			if used <= 0 || inCgroups(pid, roots) {
				continue // idle, or in a Pod: read from its cgroup
			}
			// kworker/1:2-events, ksoftirqd/0: by kind, not by CPU.
			kind, _, _ := strings.Cut(now.Comm, "/")
			out.Others[kind] += used.Seconds()
		}
	}
	for _, pod := range pods.Items {
		roles, ok := splitPod(pod, usage, strategy.agentContainer())
		if !ok {
			out.PodsUnread++
			continue
		}
		for role, used := range roles {
			out.Containers[role] += used.Seconds()
		}
	}
	return out, nil
}

// groupOf is the group of one of the cluster's processes, by its name in
// cluster.PIDs (or ProcessBench).
func groupOf(name string) string {
	switch {
	case name == ProcessBench:
		return groupManager
	case strings.HasSuffix(name, "-kubelet"):
		return groupKubelets
	case strings.HasSuffix(name, "-containerd"):
		return groupContainerds
	}
	return groupControlPlane
}

// splitPod splits the CPU time of a Pod's cgroup by its containers' roles,
// from the cgroups' usage by name (the kubelet's cgroupfs layout:
// "pod<uid>" for the Pod, the container's ID for each container). What
// the running containers do not account for is the sandbox's. It reports
// false if the Pod has no cgroup.
func splitPod(pod corev1.Pod, usage map[string]time.Duration, agentContainer string) (map[string]time.Duration, bool) {
	total, ok := usage["pod"+string(pod.UID)]
	if !ok {
		return nil, false
	}
	out := map[string]time.Duration{}
	statuses := slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses)
	for _, cs := range statuses {
		_, id, _ := strings.Cut(cs.ContainerID, "://")
		used, ok := usage[id]
		if id == "" || !ok {
			continue // not started, or gone: its time stays in the sandbox's
		}
		role := roleWorkers
		switch cs.Name {
		case agentContainer:
			role = roleAgent
		case idleSidecarName:
			role = roleSidecar
		}
		out[role] += used
		total -= used
	}
	out[roleSandbox] += total
	return out, true
}

// readProcesses reads /proc/<pid>/stat of every process.
func readProcesses() map[int]ProcStat {
	entries, _ := os.ReadDir("/proc")
	out := map[int]ProcStat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := ReadProcStat(pid); err == nil {
			out[pid] = st
		}
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

// machineBusy is the time all CPUs spent busy since boot, and how many
// CPUs are online, from /proc/stat.
func machineBusy() (busy time.Duration, cores int, err error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseMachineBusy(string(raw))
}

// parseMachineBusy reads /proc/stat: its "cpu" line's user, nice, system,
// irq and softirq (guest time is in user time already; idle, iowait and
// steal are not busy), and the count of its "cpuN" lines.
func parseMachineBusy(stat string) (time.Duration, int, error) {
	var busy time.Duration
	cores, total := 0, false
	for _, line := range strings.Split(stat, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], "cpu") {
			continue
		}
		if fields[0] != "cpu" {
			cores++
			continue
		}
		if len(fields) < 9 {
			return 0, 0, fmt.Errorf("malformed /proc/stat line %q", line)
		}
		// user nice system idle iowait irq softirq steal
		for _, i := range []int{1, 2, 3, 6, 7} {
			v, err := strconv.ParseInt(fields[i], 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("/proc/stat field %q: %w", fields[i], err)
			}
			busy += time.Duration(v) * clockTick
		}
		total = true
	}
	if !total || cores == 0 {
		return 0, 0, fmt.Errorf("/proc/stat has no \"cpu\" line or no \"cpuN\" line")
	}
	return busy, cores, nil
}

// cgroupUsage reads cpuacct.usage of every cgroup below the given roots of
// the cpuacct hierarchy mounted at base, by the cgroup's own name:
// "pod<uid>" for a Pod, the container's ID for a container (the kubelet's
// cgroupfs layout).
func cgroupUsage(base string, roots []string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, root := range roots {
		dir := filepath.Join(base, root)
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("a real node's cgroup in the cpuacct hierarchy: %w", err)
		}
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // removed while walked: an earlier JobSet's
				}
				return err
			}
			if !d.IsDir() {
				return nil
			}
			raw, err := os.ReadFile(filepath.Join(path, "cpuacct.usage"))
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walked
			}
			if err != nil {
				return err
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
	columnChildren = "children"
	columnShims    = "shims"
	columnOther    = "other"
)

// byColumn splits Busy by firstStartCPUColumns: "children" are the
// daemons' reaped children, "other" the rest of Busy. Columns no part
// was read for are left out.
func (c *FirstStartCPU) byColumn() map[string]float64 {
	out := map[string]float64{columnShims: c.Shims}
	for group, s := range c.Daemons {
		out[group] += s
	}
	for _, s := range c.ReapedChildren {
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

// split prints the columns read, as "name 1.2 s", and the other
// processes that used the most.
func (c *FirstStartCPU) split() string {
	cols := c.byColumn()
	var parts []string
	for _, name := range firstStartCPUColumns {
		if s, ok := cols[name]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f s", name, s))
		}
	}
	if top := topOthers(c.Others, 3); top != "" {
		parts = append(parts, "of which "+top)
	}
	if c.PodsUnread > 0 {
		parts = append(parts, fmt.Sprintf("%d Pods without a cgroup", c.PodsUnread))
	}
	return strings.Join(parts, ", ")
}

// topOthers names the n other processes that used the most CPU, as
// "(kworker 1.2 s, systemd 0.3 s)".
func topOthers(others map[string]float64, n int) string {
	names := slices.Collect(maps.Keys(others))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(others[b], others[a]), cmp.Compare(a, b)) })
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
// API server no longer has: the kubelets have stopped the containers of
// every earlier JobSet. Their sandboxes and images may still be removed
// later, by the kubelets' garbage collection. A Pod being deleted counts
// as live here: deleteNamespace waits until the earlier JobSets' Pods are
// gone.
func (e *env) waitPodsTornDown(ctx context.Context, timeout time.Duration) error {
	var left []string
	var listErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if listErr = e.client.List(ctx, &pods); listErr != nil {
			return false, nil
		}
		live := map[string]bool{}
		for _, p := range pods.Items {
			live["pod"+string(p.UID)] = true
		}
		usage, err := cgroupUsage(cpuV1Accounting, e.cluster.CgroupRoots())
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
	switch {
	case err == nil:
		return nil
	case listErr != nil:
		return fmt.Errorf("listing Pods: %w", listErr)
	default:
		return fmt.Errorf("the real nodes still hold the cgroups of %d deleted Pods (%v): %w", len(left), left, err)
	}
}
