package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// Chains are the iptables chains of each table before ("filter", ...).
	Chains map[string][]string `json:"chains"`
	// Links are the network interfaces before.
	Links []string `json:"links"`

	// What the cluster creates, to undo.
	Bridge     string   `json:"bridge"`
	CgroupRoot []string `json:"cgroupRoots"`
	NATChain   string   `json:"natChain"`
	WorkDir    string   `json:"workDir"`
}

var iptablesTables = []string{"filter", "nat", "mangle"}

func recordHost() (*HostState, error) {
	s := &HostState{Paths: map[string]bool{}, Chains: map[string][]string{}}
	for _, p := range hostPaths {
		_, err := os.Stat(p)
		s.Paths[p] = err == nil
	}
	fwd, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		return nil, err
	}
	s.IPForward = strings.TrimSpace(string(fwd))
	for _, t := range iptablesTables {
		chains, err := iptablesChains(t)
		if err != nil {
			return nil, err
		}
		s.Chains[t] = chains
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
	return os.WriteFile(path, data, 0o600)
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
// mounts, cgroups, links, iptables and the paths it created. It goes on
// past errors and returns them all.
func (s *HostState) restore() error {
	var errs []error
	if s.WorkDir != "" {
		errs = append(errs, killUnder(s.WorkDir))
		errs = append(errs, unmountUnder(s.WorkDir))
	}
	for _, root := range s.CgroupRoot {
		errs = append(errs, removeCgroup(root))
	}
	if s.Bridge != "" {
		if slices.Contains(mustLinks(), s.Bridge) {
			errs = append(errs, run("ip", "link", "delete", s.Bridge))
		}
	}
	// Veths left by a crashed run vanish with their network namespaces,
	// which the unmounts above released.
	for _, t := range iptablesTables {
		now, err := iptablesChains(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, chain := range now {
			if !slices.Contains(s.Chains[t], chain) {
				errs = append(errs, deleteChain(t, chain))
			}
		}
	}
	if s.IPForward != "" {
		errs = append(errs, os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(s.IPForward), 0o644))
	}
	for _, p := range hostPaths {
		if !s.Paths[p] {
			errs = append(errs, unmountUnder(p), os.RemoveAll(p))
		}
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
	for _, t := range iptablesTables {
		if !slices.Equal(now.Chains[t], s.Chains[t]) {
			out = append(out, fmt.Sprintf("iptables %s chains: %v before, %v now", t, s.Chains[t], now.Chains[t]))
		}
	}
	if !slices.Equal(now.Links, s.Links) {
		out = append(out, fmt.Sprintf("network interfaces: %v before, %v now", s.Links, now.Links))
	}
	for _, root := range s.CgroupRoot {
		for _, h := range cgroupHierarchies {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, root)); err == nil {
				out = append(out, fmt.Sprintf("cgroup %s:%s is left", h, root))
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

func iptablesChains(table string) ([]string, error) {
	out, err := exec.Command("iptables", "-w", "5", "-t", table, "-S").Output()
	if err != nil {
		return nil, fmt.Errorf("iptables -t %s -S: %w", table, err)
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
func deleteChain(table, chain string) error {
	out, err := exec.Command("iptables", "-w", "5", "-t", table, "-S").Output()
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
		errs = append(errs, run("iptables", args...))
	}
	errs = append(errs, run("iptables", "-w", "5", "-t", table, "-F", chain), run("iptables", "-w", "5", "-t", table, "-X", chain))
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

// processesUnder lists the processes whose command line names dir: the
// kubelets and containerds of a cluster, and the shims and containers
// started for them.
func processesUnder(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, []byte(dir)) {
			pids = append(pids, pid)
		}
	}
	return pids
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

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
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

// removeCgroup removes root and every cgroup below it in every hierarchy,
// deepest first (a cgroup directory is removed with rmdir once empty).
func removeCgroup(root string) error {
	var errs []error
	for _, h := range cgroupHierarchies {
		top := filepath.Join("/sys/fs/cgroup", h, root)
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
