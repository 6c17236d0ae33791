package decide

import (
	"slices"
	"testing"
	"time"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/internal/testutil"
	"github.com/inplace-dev/inplace/controller/state"
)

// Every helper of decide that asks where a JobSet's restart stands asks
// jobset.RestartStateOf: on a JobSet of each state, each answers as the
// state says.
func TestDecideHelpersAgreeWithTheRestartState(t *testing.T) {
	for _, tc := range testutil.RestartStates(t) {
		t.Run(tc.Name, func(t *testing.T) {
			// Decide goes on from the status upstream JobSet left as
			// adoptUpstream carries it over.
			js, _ := adoptUpstream(&tc.JobSet)
			s := jobset.RestartStateOf(js, &js.Status)
			if s != tc.State {
				t.Fatalf("adopted, the JobSet is %s, want %s", s, tc.State)
			}
			maxRestarts := js.Spec.FailurePolicy.MaxRestarts

			// The group is synced only while Running: a worker that exits
			// then begins an in-place restart; before the first sync,
			// after a resume, during a restart or a recreation it does
			// not.
			if jobset.InPlaceActive(js) {
				var pods []state.PodGroup
				for i := range expectedPods(js) {
					pods = append(pods, state.PodGroup{PodEpoch: state.PodEpoch{Name: "p" + string(rune('0'+i)), ReplicatedJob: "workers", Epoch: js.Status.SyncedEpoch, Ready: true},
						Names: map[string]struct{}{"p" + string(rune('0'+i)): {}}})
				}
				pods[0].WorkerExited = "c"
				if got, want := decideEpochs(js, pods).restartBegan, s == jobset.StateRunning; got != want {
					t.Errorf("decideEpochs began a restart: %t, want %t in %s", got, want, s)
				}
			}

			// An agent that crash-loops fails the JobSet only while it
			// starts: no in-place timeout bounds that wait.
			crashing := []state.PodGroup{{PodEpoch: state.PodEpoch{Name: "p0", ReplicatedJob: "workers", AgentRestarts: maxRestarts + 1}, Names: map[string]struct{}{"p0": {}}}}
			if got, want := crashLoop(js, &js.Status, crashing) != "", s == jobset.StateStarting; got != want {
				t.Errorf("crashLoop fails the JobSet: %t, want %t in %s", got, want, s)
			}

			// Only an in-place restart times out into a recreation.
			p := Plan{Status: *js.Status.DeepCopy()}
			if got, want := p.fallBackIfStuck(js, at(3600), time.Minute), s.InPlaceRestarting(); got != want {
				t.Errorf("fallBackIfStuck recreated: %t, want %t in %s", got, want, s)
			}

			// Only during an in-place restart does a write of counters
			// alone wait for the restart's end.
			read := *js.Status.DeepCopy()
			read.ReplicatedJobsStatus = []jobset.ReplicatedJobStatus{{Name: "workers", Ready: 2}}
			counted := *read.DeepCopy()
			counted.ReplicatedJobsStatus[0].Ready = 1
			if got, want := NeedsWrite(js, read, counted), !s.InPlaceRestarting(); got != want {
				t.Errorf("NeedsWrite of counters alone: %t, want %t in %s", got, want, s)
			}

			// A suspension ends an in-place restart, and nothing else.
			p = Plan{Status: *js.Status.DeepCopy()}
			p.suspendJobSet(js, at(0))
			ended := slices.ContainsFunc(p.Events, func(e Event) bool { return e.Reason == ReasonInPlaceRestartSuspended })
			if want := s.InPlaceRestarting(); ended != want {
				t.Errorf("suspendJobSet ended an in-place restart: %t, want %t in %s", ended, want, s)
			}
		})
	}
}
