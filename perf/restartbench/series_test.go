package restartbench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/simnode"
)

func TestRunningSeries(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ev := func(ms int, kind simnode.EventKind, pod string) simnode.Event {
		return simnode.Event{Time: at(ms), Kind: kind, Pod: pod}
	}
	for name, tc := range map[string]struct {
		events []simnode.Event
		want   []RunningAt
	}{
		"in place: the victim exits, the others are stopped, all start again": {
			events: []simnode.Event{
				ev(-5, simnode.WorkersStarted, "a"), // before the failure: ignored
				ev(0, simnode.WorkerExited, "a"),
				ev(10, simnode.WorkersStopped, "a"), // already stopped
				ev(20, simnode.WorkersStopped, "b"),
				ev(30, simnode.WorkersStarted, "a"),
				ev(40, simnode.WorkersStarted, "b"),
			},
			want: []RunningAt{{0, 2}, {0, 1}, {20 * time.Millisecond, 0}, {30 * time.Millisecond, 1}, {40 * time.Millisecond, 2}},
		},
		"Recreate: old Pods stop, new ones start": {
			events: []simnode.Event{
				ev(0, simnode.WorkerExited, "a"),
				ev(20, simnode.WorkersStopped, "b"),
				ev(30, simnode.WorkersStarted, "a2"),
				ev(40, simnode.WorkersStarted, "b2"),
				ev(42, simnode.WorkersStarted, "b2"), // a repeat: no change
				ev(50, simnode.WorkersStopped, "a"),  // after every worker ran again: not the restart's
			},
			want: []RunningAt{{0, 2}, {0, 1}, {20 * time.Millisecond, 0}, {30 * time.Millisecond, 1}, {40 * time.Millisecond, 2}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := runningSeries(tc.events, t0, at(45), 2)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestThinKeepsTheShape(t *testing.T) {
	var series []RunningAt
	for i := range 2000 {
		series = append(series, RunningAt{time.Duration(i) * time.Millisecond, 1000 - i/2})
	}
	series = append(series, RunningAt{3 * time.Second, 1000})
	got := thin(series, 100)
	if len(got) > 100 || len(got) < 50 {
		t.Fatalf("%d points, want at most 100 and more than 50", len(got))
	}
	if got[0] != series[0] || got[len(got)-1] != series[len(series)-1] {
		t.Errorf("first %v and last %v points, want %v and %v", got[0], got[len(got)-1], series[0], series[len(series)-1])
	}
	lowest := got[0].Workers
	for i, p := range got {
		lowest = min(lowest, p.Workers)
		if i > 0 && p.At < got[i-1].At {
			t.Fatalf("not in time order at %d: %v", i, got)
		}
	}
	if lowest != 1000-1999/2 {
		t.Errorf("lowest point %d, want %d", lowest, 1000-1999/2)
	}
}

func TestChartsWriteSVG(t *testing.T) {
	result := func(n int, strategy string, running time.Duration) Result {
		return Result{Nodes: n, Profile: ProfileZero, Strategy: strategy, Failure: FailureExit, WorkersRunning: running,
			Running:    []RunningAt{{0, n}, {running / 4, 0}, {running / 2, n / 2}},
			CPUSeconds: map[string]float64{"kube-apiserver": float64(n) / 100, "etcd": float64(n) / 1000}}
	}
	report := Report{ControlPlane: ControlPlaneScale, Results: []Result{
		result(10, string(jobset.InPlaceRestart), time.Second), result(10, string(jobset.Recreate), 2*time.Second),
		result(50, string(jobset.InPlaceRestart), 2*time.Second), result(50, string(jobset.Recreate), 4*time.Second),
	}, Floors: []Floor{
		{Nodes: 10, Kind: FloorNeeded, CPUSeconds: map[string]float64{"kube-apiserver": 0.05}},
		{Nodes: 10, Kind: FloorKubelet, CPUSeconds: map[string]float64{"kube-apiserver": 0.15}},
		{Nodes: 50, Kind: FloorNeeded, CPUSeconds: map[string]float64{"kube-apiserver": 0.25}},
		{Nodes: 50, Kind: FloorKubelet, CPUSeconds: map[string]float64{"kube-apiserver": 0.75}},
	}}
	dir := t.TempDir()
	paths, err := Charts(dir, report)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"restart-running-10-zero-exit.svg", "restart-running-50-zero-exit.svg", "restart-cpu-zero-exit.svg"}
	if len(paths) != len(want) {
		t.Fatalf("charts %v, want %v", paths, want)
	}
	for i, p := range paths {
		if filepath.Base(p) != want[i] {
			t.Errorf("chart %d is %s, want %s", i, filepath.Base(p), want[i])
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), "<svg") || !strings.Contains(string(raw), "InPlaceRestart") {
			t.Errorf("%s is not an SVG with a legend naming the strategies", p)
		}
		// The CPU chart draws both floors.
		if strings.HasPrefix(filepath.Base(p), "restart-cpu-") && (!strings.Contains(string(raw), ">floor<") || !strings.Contains(string(raw), ">kubelet floor<")) {
			t.Errorf("%s has no line for each floor", p)
		}
	}
}
