package restartbench

import (
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// TestSmoke runs the restart benchmark small (N = 10 and 50 in one process,
// as `make bench-restart` runs several sizes; one repeat, the realistic node
// latencies): it fails if an in-place restart is not faster than Recreate
// at N = 50, or if the measurements are incomplete. With zero node latency
// the two differ by about a third at this size (1.7–2.0 s against
// 2.6–3.0 s), less than a loaded machine's noise under the race detector;
// with a node's real latencies, which a Recreate pays for every new Pod
// and an in-place restart only in part, by about 1.4× (4.4 s against
// 6.3 s: the headroom of the check that in place is faster).
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local cluster")
	}
	report, err := Run(t.Context(), Config{
		Nodes: []int{10, 50}, Repeats: 1, Profiles: []string{ProfileRealistic},
		Strategies:      []Strategy{InPlace, Recreate},
		Failures:        []string{FailureExit},
		CountPodChanges: true,
		Timeout:         3 * time.Minute,
		Progress:        os.Stderr,
		Log:             logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	byStrategy := map[string]Result{}
	for _, r := range report.Results {
		if r.Nodes == 50 {
			byStrategy[r.Strategy] = r
		}
	}
	inPlace, recreate := byStrategy[string(jobset.InPlaceRestart)], byStrategy[string(jobset.Recreate)]
	for _, d := range []time.Duration{inPlace.Detection, inPlace.AgentsRestarted, inPlace.EpochsReported, inPlace.EpochsWritten, inPlace.Synced, inPlace.WorkersRunning, recreate.WorkersRunning} {
		if d <= 0 {
			t.Fatalf("incomplete measurements: %+v %+v", inPlace, recreate)
		}
	}
	// The API server shows the failure before the workers run again (its
	// order against the detection is the two watches' race); the load it
	// met is read for every process.
	for _, r := range []Result{inPlace, recreate} {
		if r.FailureSeen <= 0 || r.FailureSeen >= r.WorkersRunning {
			t.Errorf("%s: failure seen after %v, workers running after %v", r.Strategy, r.FailureSeen, r.WorkersRunning)
		}
		if r.Failure == FailureExit && (r.ExitWritten <= 0 || r.ExitWritten >= r.WorkersRunning) {
			t.Errorf("%s: the exit's status write returned after %v, workers running after %v", r.Strategy, r.ExitWritten, r.WorkersRunning)
		}
		if _, ok := r.LoadBefore["kube-apiserver"]; !ok || len(r.LoadBefore) != len(cpuColumns) {
			t.Errorf("%s: load before the failure %v, want one entry per process %v", r.Strategy, r.LoadBefore, cpuColumns)
		}
	}
	if inPlace.WorkersRunning >= recreate.WorkersRunning {
		t.Errorf("in place took %v, Recreate %v: in place is not faster", inPlace.WorkersRunning, recreate.WorkersRunning)
	}
	if inPlace.CPUSeconds["kube-apiserver"] <= 0 || inPlace.CPUSeconds[ProcessBench] <= 0 {
		t.Errorf("no CPU time accounted to the API server and this process: %v", inPlace.CPUSeconds)
	}
	// Both floors for each size, in order.
	if len(report.Floors) != 4 || report.Floors[3].Nodes != 50 {
		t.Fatalf("floors %+v: want the needed and the kubelet floor for each size", report.Floors)
	}
	// The floors write copies of the JobSet's Pods, agent and all: per
	// Pod the agent's 2 requests and the kubelet's 2 (or, for the kubelet
	// floor, 6) status writes, and 2 of the controller's, every one sent
	// at least once, each agent on a new connection.
	var f Floor
	for _, fl := range report.Floors[2:] {
		want := map[string]int{FloorNeeded: 4*50 + 2, FloorKubelet: 8*50 + 2}[fl.Kind]
		if fl.Total <= 0 || fl.PodBytes < 2000 || controlPlaneCPU(fl.CPUSeconds) <= 0 {
			t.Errorf("%s floor: %v, Pods of %d bytes (the JobSet's have an injected agent), %v CPU", fl.Kind, fl.Total, fl.PodBytes, fl.CPUSeconds)
		}
		if total(fl.Needed) != want || total(fl.Requests) < total(fl.Needed) || fl.Handshakes < 50 {
			t.Errorf("%s floor: %d requests needed, %d sent, %d handshakes; want %d, at least as many, at least 50", fl.Kind, total(fl.Needed), total(fl.Requests), fl.Handshakes, want)
		}
		for actor, counts := range fl.Needed {
			for verb, n := range counts {
				if got := fl.Requests[actor][verb]; got < n {
					t.Errorf("%s floor: %s sent %d %s, want at least %d", fl.Kind, actor, got, verb, n)
				}
			}
		}
		if fl.Kind == FloorNeeded {
			f = fl
		}
	}
	if report.Floors[2].Kind != FloorNeeded || report.Floors[3].Kind != FloorKubelet {
		t.Errorf("floors of N = 50: %s and %s, want %s and %s", report.Floors[2].Kind, report.Floors[3].Kind, FloorNeeded, FloorKubelet)
	}
	// Each agent's patch and each of the kubelet's status writes changes
	// its Pod, and nothing else writes the floor's Pods: a watcher of
	// them receives exactly one event for each.
	for _, fl := range report.Floors[2:] {
		if want := (1 + fl.StatusWritesPerPod) * fl.Nodes; fl.PodChanges != want {
			t.Errorf("%s floor: a watcher of its Pods received %d changes, want %d (an epoch patch and %d status writes per Pod): fewer if some writes changed nothing", fl.Kind, fl.PodChanges, want, fl.StatusWritesPerPod)
		}
		if fl.WatchEvents < float64(fl.PodChanges) {
			t.Errorf("%s floor: the API server sent %.0f watch events, fewer than the %d a single watcher of its Pods received", fl.Kind, fl.WatchEvents, fl.PodChanges)
		}
	}
	if report.ControlPlane != ControlPlaneScale {
		t.Errorf("control-plane profile %q, want the default %q", report.ControlPlane, ControlPlaneScale)
	}
	// What the control plane paid, and the workers running over time.
	for _, r := range []Result{inPlace, recreate} {
		if controlPlaneCPU(r.CPUSeconds) <= 0 || r.WatchEvents <= 0 {
			t.Errorf("%s: control-plane CPU %v, watch events %v", r.Strategy, r.CPUSeconds, r.WatchEvents)
		}
		lowest := r.Nodes
		for _, p := range r.Running {
			lowest = min(lowest, p.Workers)
		}
		if len(r.Running) < 2 || r.Running[0].Workers != r.Nodes || lowest >= r.Nodes {
			t.Errorf("%s: workers running over time %v: want all at the failure, then fewer", r.Strategy, r.Running)
		}
	}
	// Every agent restarts in place as a new process, which follows its
	// broadcast from the leader it kept the address of: it opens no
	// connection to the API server. (One that could not reach the leader
	// within its fallback wait, on a loaded machine, watches instead.)
	if h := inPlace.Handshakes[ActorAgents]; h > inPlace.Nodes/5 {
		t.Errorf("in place: %d of the %d agents started again opened a connection to the API server, want at most a fifth: the others follow the leader's stream", h, inPlace.Nodes)
	}
	charts, err := Charts(t.TempDir(), report)
	if err != nil || len(charts) != 3 {
		t.Errorf("charts %v (%v): want the workers running at N = 10 and 50, and the CPU per Pod against N", charts, err)
	}
	// An agent restarted in place sends at most two requests: the watch
	// that delivers its broadcast if it cannot follow the leader's, and
	// its epoch's patch if it cannot report it to the leader; it learns
	// its Pod's epoch from its environment or the leader. The agent of the Pod whose worker
	// failed may also read its Pod, if it starts before the epoch is
	// deprecated; refused requests are sent again.
	agentRequests, agentReads := sum(inPlace.Requests[ActorAgents]), inPlace.Requests[ActorAgents]["get pods"]
	refused := sum(inPlace.Rejected)
	if float64(agentRequests) > 2*float64(inPlace.Nodes)+1+refused || agentReads > 1 {
		t.Errorf("the agents sent %d requests (%d reads of their Pods) in an in-place restart of %d Pods with %.0f refused, want at most 2 per Pod, 1 read, and the refused again: %v",
			agentRequests, agentReads, inPlace.Nodes, refused, inPlace.Requests[ActorAgents])
	}
	// The critical path is the part of the window before the release.
	for _, r := range []Result{inPlace, recreate} {
		for actor, counts := range r.CriticalRequests {
			for key, n := range counts {
				if n > r.Requests[actor][key] {
					t.Errorf("%s: %d %q requests of the %s on the critical path, more than the %d in all", r.Strategy, n, key, actor, r.Requests[actor][key])
				}
			}
		}
	}
	if diff := cmp.Diff(recreate.Requests, recreate.CriticalRequests); diff != "" {
		t.Errorf("Recreate: requests on the critical path differ from all of them; want the same, nothing releases its group early (-all +critical):\n%s", diff)
	}
	t.Logf("in place %v (floor %v), Recreate %v", inPlace.WorkersRunning, f.Total, recreate.WorkersRunning)
	t.Logf("in place: %+v", inPlace)
}
