package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// hostPaths are the places outside a cluster's working directory that a
// real node's stack (containerd, its shims, runc, the CNI plugins, the
// kubelet) writes to whatever it is told.
var hostPaths = []string{
	"/run/containerd",
	"/var/lib/cni",
	"/var/lib/kubelet",
	"/var/log/containers",
	"/var/log/pods",
}

// cgroupHierarchies are the cgroup v1 hierarchies a kubelet with the
// cgroupfs driver needs its cgroupRoot in.
var cgroupHierarchies = []string{"blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "memory", "pids", "systemd"}

// HostState is what a real-node cluster changes on the host, recorded
// before it starts so that its teardown (or the sweep of a crashed run)
// restores it and a test can check that nothing is left.
type HostState struct {
	// Paths that existed before: those that did not are removed whole.
	Paths map[string]bool `json:"paths"`
	// IPForward is net.ipv4.ip_forward before (the bridge plugin sets it).
	IPForward string `json:"ipForward"`
	// Chains are the chains of each table before, for iptables and
	// ip6tables ("iptables/filter", "ip6tables/nat", ...): the kubelet
	// programs both families.
	Chains map[string][]string `json:"chains"`
	// BootID tells a recording of this boot from one of an earlier boot,
	// whose host-level undo (chains, ip_forward, host paths) must not run.
	BootID string `json:"bootID"`
	// Links are the network interfaces before.
	Links []string `json:"links"`

	// What the cluster creates, to undo.
	Bridge       string   `json:"bridge"`
	CgroupRoot   []string `json:"cgroupRoots"`
	NATChain     string   `json:"natChain"`
	ForwardChain string   `json:"forwardChain"`
	WorkDir      string   `json:"workDir"`
}

var (
	iptablesTables = []string{"filter", "nat", "mangle"}
	iptablesFamily = []string{"iptables", "ip6tables"}
	// kubeletChains are the chains a kubelet creates for itself; restore
	// removes them if they were not there before, and no other chain but
	// the cluster's own NAT chain.
	kubeletChains = []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT", "KUBE-NODEPORTS"}
)

func bootID() string {
	id, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(id))
}

func recordHost() (*HostState, error) {
	s := &HostState{Paths: map[string]bool{}, Chains: map[string][]string{}, BootID: bootID()}
	for _, p := range hostPaths {
		_, err := os.Stat(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		s.Paths[p] = err == nil
	}
	fwd, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		return nil, err
	}
	s.IPForward = strings.TrimSpace(string(fwd))
	for _, fam := range iptablesFamily {
		for _, t := range iptablesTables {
			chains, err := iptablesChains(fam, t)
			if err != nil {
				return nil, err
			}
			s.Chains[fam+"/"+t] = chains
		}
	}
	if s.Links, err = links(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *HostState) save(path string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	// Written whole or not at all: a torn file would hide a run's
	// leftovers from the sweep.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func loadHostState(path string) (*HostState, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s HostState
	return &s, json.Unmarshal(data, &s)
}

// restore undoes what a real-node cluster did to the host, in the order
// that works: processes first (shims outlive their containerd), then
// mounts, cgroups, the bridge and its veths, and — only within the boot it
// was recorded in — the iptables chains it or its kubelets created, the
// host paths it created and ip_forward. It goes on past errors and returns
// them all.
func (s *HostState) restore() error {
	var errs []error
	if s.WorkDir != "" {
		errs = append(errs, killUnder(s.WorkDir))
		errs = append(errs, unmountUnder(s.WorkDir))
	}
	for _, root := range s.CgroupRoot {
		errs = append(errs, removeCgroup(root))
	}
	if s.Bridge != "" && slices.Contains(mustLinks(), s.Bridge) {
		// Its veths first: the kernel removes them with their network
		// namespaces, but not at once.
		if out, err := exec.Command("ip", "-o", "link", "show", "master", s.Bridge).Output(); err == nil {
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if f := strings.Fields(line); len(f) > 1 {
					_ = run("ip", "link", "delete", strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
				}
			}
		}
		errs = append(errs, run("ip", "link", "delete", s.Bridge))
	}
	if s.BootID != bootID() {
		return errors.Join(errs...)
	}
	for _, fam := range iptablesFamily {
		for _, t := range iptablesTables {
			now, err := iptablesChains(fam, t)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, chain := range now {
				ours := chain == s.NATChain || chain == s.ForwardChain || slices.Contains(kubeletChains, chain)
				if ours && !slices.Contains(s.Chains[fam+"/"+t], chain) {
					errs = append(errs, deleteChain(fam, t, chain))
				}
			}
		}
	}
	// What is shared with whatever else runs containers here is left alone
	// if something does: its containerd may use /run/containerd now.
	if others := foreignRuntimes(s.WorkDir); len(others) > 0 {
		errs = append(errs, fmt.Errorf("left ip_forward and %v as they are: other container runtimes run here (pids %v)", hostPaths, others))
		return errors.Join(errs...)
	}
	if fwd, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err == nil && s.IPForward != "" && strings.TrimSpace(string(fwd)) != s.IPForward {
		errs = append(errs, os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(s.IPForward), 0o644))
	}
	for _, p := range hostPaths {
		if s.Paths[p] {
			continue
		}
		if m := mountsUnder(p); len(m) > 0 {
			// Never unmount outside the working directory, nor remove
			// through a mount.
			errs = append(errs, fmt.Errorf("left %s: mounted there: %v", p, m))
			continue
		}
		errs = append(errs, os.RemoveAll(p))
	}
	return errors.Join(errs...)
}

// Differences lists how the host differs from s as recorded: what a
// teardown left behind.
func (s *HostState) Differences() []string {
	now, err := recordHost()
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, p := range hostPaths {
		if now.Paths[p] != s.Paths[p] {
			out = append(out, fmt.Sprintf("%s: existed %v before, %v now", p, s.Paths[p], now.Paths[p]))
		}
	}
	if now.IPForward != s.IPForward {
		out = append(out, fmt.Sprintf("net.ipv4.ip_forward: %s before, %s now", s.IPForward, now.IPForward))
	}
	for key, before := range s.Chains {
		if !slices.Equal(now.Chains[key], before) {
			out = append(out, fmt.Sprintf("%s chains: %v before, %v now", key, before, now.Chains[key]))
		}
	}
	if !slices.Equal(now.Links, s.Links) {
		out = append(out, fmt.Sprintf("network interfaces: %v before, %v now", s.Links, now.Links))
	}
	for _, root := range s.CgroupRoot {
		for _, h := range mountedHierarchies() {
			if _, err := os.Stat(filepath.Join(h, root)); err == nil {
				out = append(out, fmt.Sprintf("cgroup %s is left", filepath.Join(h, root)))
			}
		}
	}
	if s.WorkDir != "" {
		if pids := processesUnder(s.WorkDir); len(pids) > 0 {
			out = append(out, fmt.Sprintf("processes left under %s: %v", s.WorkDir, pids))
		}
		if m := mountsUnder(s.WorkDir); len(m) > 0 {
			out = append(out, fmt.Sprintf("mounts left under %s: %v", s.WorkDir, m))
		}
	}
	return out
}

func iptablesChains(family, table string) ([]string, error) {
	out, err := exec.Command(family, "-w", "5", "-t", table, "-S").Output()
	if err != nil {
		return nil, fmt.Errorf("%s -t %s -S: %w", family, table, err)
	}
	var chains []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "-N" || f[0] == "-P") {
			chains = append(chains, f[1])
		}
	}
	sort.Strings(chains)
	return chains, nil
}

// deleteChain removes every rule that jumps to chain, then the chain.
func deleteChain(family, table, chain string) error {
	out, err := exec.Command(family, "-w", "5", "-t", table, "-S").Output()
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "-A" || !slices.Contains(f, "-j") || f[slices.Index(f, "-j")+1] != chain {
			continue
		}
		args := append([]string{"-w", "5", "-t", table, "-D"}, f[1:]...)
		errs = append(errs, run(family, args...))
	}
	errs = append(errs, run(family, "-w", "5", "-t", table, "-F", chain), run(family, "-w", "5", "-t", table, "-X", chain))
	return errors.Join(errs...)
}

func links() ([]string, error) {
	ifaces, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, i := range ifaces {
		out = append(out, i.Name())
	}
	sort.Strings(out)
	return out, nil
}

func mustLinks() []string {
	l, _ := links()
	return l
}

// runtimeExecutables are the programs of a node's stack (a kubelet, a
// containerd, its shims, runc) and of other container engines a host may
// run.
var runtimeExecutables = []string{"kubelet", "containerd", "containerd-shim-runc-v2", "runc", "dockerd", "crio"}

// runtimeProcesses lists the processes of runtimeExecutables, split into
// those whose command line names a path under dir — one cluster's nodes (a
// shim names its containerd's socket) — and the others.
func runtimeProcesses(dir string) (ours, others []int) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		if !slices.Contains(runtimeExecutables, filepath.Base(string(argv0))) {
			continue
		}
		if bytes.Contains(cmdline, []byte(dir+"/")) {
			ours = append(ours, pid)
		} else {
			others = append(others, pid)
		}
	}
	return ours, others
}

// processesUnder lists the processes of the nodes of the cluster under dir.
func processesUnder(dir string) []int {
	ours, _ := runtimeProcesses(dir)
	return ours
}

// foreignRuntimes lists the container runtimes and kubelets running on the
// host that are not a cluster's under dir.
func foreignRuntimes(dir string) []int {
	_, others := runtimeProcesses(dir)
	return others
}

// killUnder kills the processes of processesUnder(dir) and waits until
// they are gone: containerd's shims hold the containers' processes as
// children, which die with them.
func killUnder(dir string) error {
	for _, pid := range processesUnder(dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return len(processesUnder(dir)) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("processes still running under %s: %v", dir, processesUnder(dir))
	}
	return nil
}

// mount is one line of /proc/self/mountinfo: where, and the file system.
type mount struct{ point, fsType string }

func mounts() []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent dev root point options [optional...] - fstype source options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, types := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(types) < 1 {
			continue
		}
		out = append(out, mount{point: unescapeMount(fields[4]), fsType: types[0]})
	}
	return out
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	var out []string
	for _, m := range mounts() {
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			out = append(out, m.point)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return slices.Compact(out)
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// unmountUnder unmounts everything at or below dir, deepest first, lazily
// for what is still busy; a path mounted twice is unmounted twice.
func unmountUnder(dir string) error {
	var errs []error
	for range 10 {
		mounts := mountsUnder(dir)
		if len(mounts) == 0 {
			return nil
		}
		for _, m := range mounts {
			if err := syscall.Unmount(m, 0); err != nil {
				if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
					errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
				}
			}
		}
	}
	if left := mountsUnder(dir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("still mounted: %v", left))
	}
	return errors.Join(errs...)
}

// createCgroup makes root in every hierarchy the kubelet needs; cpuset
// needs its CPUs and memory nodes set before anything can join it.
func createCgroup(root string) error {
	for _, h := range cgroupHierarchies {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h)); err != nil {
			continue // not mounted here: the kubelet does without it
		}
		dir := filepath.Join("/sys/fs/cgroup", h, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if h == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// mountedHierarchies lists the cgroup hierarchies mounted on this host,
// v1 and v2 alike (a hybrid host has cgroup2 at /sys/fs/cgroup/unified,
// where runc and the kubelet make cgroups too).
func mountedHierarchies() []string {
	var out []string
	for _, m := range mounts() {
		if m.fsType == "cgroup" || m.fsType == "cgroup2" {
			out = append(out, m.point)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// removeCgroup removes root and every cgroup below it in every mounted
// hierarchy, deepest first (a cgroup directory is removed with rmdir once
// empty).
func removeCgroup(root string) error {
	var errs []error
	for _, h := range mountedHierarchies() {
		top := filepath.Join(h, root)
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
