package restartbench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Idle, iowait and steal are not busy; interrupts are. Cores are the cpuN
// lines.
func TestParseMachineBusy(t *testing.T) {
	stat := "cpu  100 2 30 5000 40 5 6 7 0 0\ncpu0 50 1 15 2500 20 3 3 4 0 0\ncpu1 50 1 15 2500 20 2 3 3 0 0\nintr 1 2 3\n"
	busy, cores, err := parseMachineBusy(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 143 * clockTick; busy != want || cores != 2 {
		t.Errorf("busy %v of %d cores, want %v of 2", busy, cores, want)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 x 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3 4 5 6 7 8"} {
		if _, _, err := parseMachineBusy(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestGroupOf(t *testing.T) {
	for name, want := range map[string]string{
		ProcessBench: groupManager, "real-0-kubelet": groupKubelets, "real-3-containerd": groupContainerds,
		"etcd": groupControlPlane, "kube-apiserver": groupControlPlane, "coredns": groupControlPlane,
	} {
		if got := groupOf(name); got != want {
			t.Errorf("%s: group %q, want %q", name, got, want)
		}
	}
}

// A Pod's cgroup is split by its running containers' roles; the rest is
// the sandbox's. A container whose cgroup is gone leaves its time there.
func TestSplitPod(t *testing.T) {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1"}, Status: corev1.PodStatus{
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "inplace-agent", ContainerID: "containerd://a1"}},
		ContainerStatuses: []corev1.ContainerStatus{
			{Name: "train", ContainerID: "containerd://w1"},
			{Name: "eval", ContainerID: "containerd://w2"},
			{Name: "late"}, // not started
			{Name: "old", ContainerID: "containerd://x"}, // its cgroup is gone
		},
	}}
	usage := map[string]time.Duration{"podu1": 1000, "a1": 300, "w1": 200, "w2": 100, "podu2": 5}
	got, ok := splitPod(pod, usage, "inplace-agent")
	if !ok {
		t.Fatal("no cgroup found for the Pod")
	}
	want := map[string]time.Duration{roleAgent: 300, roleWorkers: 300, roleSandbox: 400}
	if len(got) != len(want) {
		t.Errorf("roles %v, want %v", got, want)
	}
	for role, d := range want {
		if got[role] != d {
			t.Errorf("%s: %v, want %v", role, got[role], d)
		}
	}
	pod.UID = "gone"
	if _, ok := splitPod(pod, usage, "inplace-agent"); ok {
		t.Error("a Pod without a cgroup was split")
	}
}

// Every cgroup below the roots is read by its own name; a missing root is
// an error, not an empty node.
func TestCgroupUsage(t *testing.T) {
	base := t.TempDir()
	write := func(dir, usage string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(base, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(base, dir, "cpuacct.usage"), []byte(usage+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("node-0", "900")
	write("node-0/kubepods/burstable/podu1", "500")
	write("node-0/kubepods/burstable/podu1/c1", "300")
	write("node-1/kubepods/podu2", "70")
	got, err := cgroupUsage(base, []string{"node-0", "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]time.Duration{"podu1": 500, "c1": 300, "podu2": 70, "node-0": 900} {
		if got[name] != want {
			t.Errorf("%s: %v, want %v", name, got[name], want)
		}
	}
	if _, err := cgroupUsage(base, []string{"node-9"}); err == nil {
		t.Error("a missing root: want an error")
	}
	write("node-2", "x")
	if _, err := cgroupUsage(base, []string{"node-2"}); err == nil || !strings.Contains(err.Error(), "node-2") {
		t.Errorf("an unreadable usage: got %v, want an error naming its cgroup", err)
	}
}

// What no part accounts for is "other"; the daemons' children are one
// column; a role no container had is no column.
func TestFirstStartCPUColumns(t *testing.T) {
	c := &FirstStartCPU{Busy: 20, Shims: 1,
		Daemons:        map[string]float64{groupControlPlane: 4, groupManager: 2, groupKubelets: 3, groupContainerds: 1},
		ReapedChildren: map[string]float64{groupKubelets: 0.25, groupContainerds: 0.75},
		Containers:     map[string]float64{roleAgent: 2, roleWorkers: 1.5, roleSandbox: 0.5},
		Others:         map[string]float64{"kworker": 0.5, "systemd": 0.25, "go": 1, "link": 0.1}}
	cols := c.byColumn()
	for name, want := range map[string]float64{groupControlPlane: 4, groupManager: 2, groupKubelets: 3, groupContainerds: 1, columnChildren: 1, columnShims: 1, roleAgent: 2, roleWorkers: 1.5, roleSandbox: 0.5, columnOther: 4} {
		if cols[name] != want {
			t.Errorf("%s: %v s, want %v s", name, cols[name], want)
		}
	}
	got := c.split()
	if _, ok := cols[roleSidecar]; ok || strings.Contains(got, roleSidecar) {
		t.Errorf("split %q: no sidecar ran, want no sidecar column", got)
	}
	if !strings.HasPrefix(got, "control plane 4.0 s") || !strings.HasSuffix(got, "of which (go 1.0 s, kworker 0.5 s, systemd 0.2 s)") {
		t.Errorf("split %q: want the columns in order, then the three other processes that used the most", got)
	}
}

// Each JobSet's busy CPU is set against Recreate's of its own round; a
// part no run of a row had prints as "-".
func TestFirstStartCPUsAgainstRecreate(t *testing.T) {
	cpu := func(busy, sidecar float64) *FirstStartCPU {
		c := &FirstStartCPU{Window: 10 * time.Second, Cores: 2, Busy: busy, Containers: map[string]float64{roleWorkers: 1}}
		if sidecar > 0 {
			c.Containers[roleSidecar] = sidecar
		}
		return c
	}
	var b strings.Builder
	FirstStartCPUs(&b, Report{FirstStarts: []FirstStart{
		{Nodes: 16, Strategy: string(Recreate), Round: 0, CPU: cpu(18, 0)},
		{Nodes: 16, Strategy: string(RecreateSidecar), Round: 0, CPU: cpu(19, 1)},
		{Nodes: 16, Strategy: string(Recreate), Round: 1, CPU: cpu(10, 0)},
		{Nodes: 16, Strategy: string(RecreateSidecar), Round: 1, CPU: cpu(14, 2)},
		{Nodes: 16, Strategy: string(Recreate), Round: 2, CPU: cpu(12, 0)},
		{Nodes: 16, Strategy: string(RecreateSidecar), Round: 2, CPU: cpu(20, 3)},
		{Nodes: 16, Strategy: string(InPlaceProcess), Round: 2}, // not accounted
	}})
	got := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"16 Recreate 10.00 s 1.20 of 2 12.0 s - - - - - - 0.0 - - - 1.0 11.0",
		"16 Recreate/sidecar 10.00 s 1.90 of 2 19.0 s +4.0 s (+1.0…+8.0 s) - - - - - 0.0 - - 2.0 1.0 16.0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(got, string(InPlaceProcess)) {
		t.Errorf("a first start without CPU has a row:\n%s", b.String())
	}
	var none strings.Builder
	FirstStartCPUs(&none, Report{FirstStarts: []FirstStart{{Nodes: 16, Strategy: string(Recreate)}}})
	if none.Len() != 0 {
		t.Errorf("no CPU measured: want no table, got\n%s", none.String())
	}
}
