package restartbench

import (
	"strings"
	"testing"
	"time"
)

// Idle and iowait are not busy; steal and interrupts are.
func TestParseMachineBusy(t *testing.T) {
	got, err := parseMachineBusy("cpu  100 2 30 5000 40 5 6 7 0 0")
	if err != nil {
		t.Fatal(err)
	}
	if want := 150 * clockTick; got != want {
		t.Errorf("busy %v, want %v", got, want)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 x 4 5 6 7 8"} {
		if _, err := parseMachineBusy(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

// What no part accounts for is "other"; the daemons' children are one
// column.
func TestFirstStartCPUColumns(t *testing.T) {
	c := &FirstStartCPU{Busy: 20, Shims: 1,
		Processes:  map[string]float64{groupControlPlane: 4, groupManager: 2, groupKubelets: 3, groupContainerds: 1},
		Children:   map[string]float64{groupKubelets: 0.25, groupContainerds: 0.75},
		Containers: map[string]float64{roleAgent: 2, roleWorkers: 1.5, roleSandbox: 0.5}}
	cols := c.byColumn()
	for name, want := range map[string]float64{groupControlPlane: 4, groupManager: 2, groupKubelets: 3, groupContainerds: 1, columnChildren: 1, columnShims: 1, roleAgent: 2, roleWorkers: 1.5, roleSandbox: 0.5, columnOther: 4} {
		if cols[name] != want {
			t.Errorf("%s: %v s, want %v s", name, cols[name], want)
		}
	}
	if got := c.split(); strings.Contains(got, roleSidecar) || !strings.HasPrefix(got, "control plane 4.0 s") {
		t.Errorf("split %q: want the non-zero columns in order", got)
	}
}

// Each JobSet's busy CPU is set against Recreate's of its own round.
func TestFirstStartCPUsAgainstRecreate(t *testing.T) {
	cpu := func(busy float64) *FirstStartCPU {
		return &FirstStartCPU{Window: 10 * time.Second, Cores: 2, Busy: busy, Processes: map[string]float64{}, Containers: map[string]float64{roleWorkers: 1}}
	}
	var b strings.Builder
	FirstStartCPUs(&b, Report{FirstStarts: []FirstStart{
		{Nodes: 16, Strategy: string(Recreate), Round: 0, CPU: cpu(18)},
		{Nodes: 16, Strategy: string(InPlaceProcess), Round: 0, CPU: cpu(19)},
		{Nodes: 16, Strategy: string(Recreate), Round: 1, CPU: cpu(10)},
		{Nodes: 16, Strategy: string(InPlaceProcess), Round: 1, CPU: cpu(14)},
	}})
	got := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"16 Recreate 10.00s 1.80 of 2 18.0 s -", "16 InPlaceRestart/process 10.00s 1.90 of 2 19.0 s +4.0 s (+1.0…+4.0 s)"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	var none strings.Builder
	FirstStartCPUs(&none, Report{FirstStarts: []FirstStart{{Nodes: 16, Strategy: string(Recreate)}}})
	if none.Len() != 0 {
		t.Errorf("no CPU measured: want no table, got\n%s", none.String())
	}
}
