package app

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

// restartStateCase is a JobSet of the API's restart-state fixtures and
// the state it is in.
type restartStateCase struct {
	Name   string              `json:"name"`
	State  jobset.RestartState `json:"state"`
	JobSet jobset.JobSet       `json:"jobSet"`
}

// restartStates reads the API's restart-state fixtures: a JobSet for
// every state, which the tests of each reader of the state walk.
func restartStates(t *testing.T) []restartStateCase {
	t.Helper()
	data, err := os.ReadFile("../../../api/jobset/v1alpha2/testdata/restart-states.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []restartStateCase
	if err := yaml.UnmarshalStrict(data, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// inplacectl status says what the restart state says: the state itself,
// a wait for an epoch only while a restart is under way, and barriers
// held for the reason the state gives.
func TestStatusAgreesWithTheRestartState(t *testing.T) {
	for _, tc := range restartStates(t) {
		t.Run(tc.Name, func(t *testing.T) {
			js := &tc.JobSet
			s := jobset.RestartStateOf(js, &js.Status)
			deprecated, synced := js.Status.DeprecatedEpoch, js.Status.SyncedEpoch
			if jobset.WrittenByUpstream(&js.Status) {
				deprecated, synced = jobset.UpstreamEpochs(&js.Status)
			}
			// The broadcast the controller writes from those epochs.
			b := &protocol.Broadcast{DeprecatedEpoch: deprecated, SyncedEpoch: synced, OpenReplicatedJobs: []string{"workers"}}
			r := buildStatusReport(statusInputs{jobSet: js, broadcast: b})
			var out bytes.Buffer
			writeStatusTable(&out, r, false)
			text := out.String()

			if r.RestartState != string(s) {
				t.Errorf("restartState %q, want %s", r.RestartState, s)
			}
			wantState := "Active"
			if s == jobset.StateSuspended || s == jobset.StateFailed || s == jobset.StateCompleted {
				wantState = string(s)
			}
			if r.State != wantState {
				t.Errorf("state %q, want %s in %s", r.State, wantState, s)
			}
			if header := "state " + wantState; wantState == "Active" && !strings.Contains(text, header+" ("+string(s)+")\n") ||
				wantState != "Active" && !strings.Contains(text, header+"\n") {
				t.Errorf("the table does not say the state %s:\n%s", s, text)
			}
			if r.InPlace == nil {
				return
			}

			restarting := jobset.InPlaceActive(js) && s.RestartUnderWay()
			if got := r.InPlace.WaitingForEpoch > 0; got != restarting {
				t.Errorf("waitingForEpoch %d in %s", r.InPlace.WaitingForEpoch, s)
			}
			if got := strings.Contains(text, "restart in progress"); got != restarting {
				t.Errorf("the table says a restart is in progress: %t, want %t in %s:\n%s", got, restarting, s, text)
			}
			barrier := r.InPlace.ReplicatedJobs[0].Barrier
			switch {
			case restarting:
				if barrier != "held: restarting" {
					t.Errorf("barrier %q in %s, want held: restarting", barrier, s)
				}
			case s == jobset.StateSuspended:
				if barrier != "held: suspended" {
					t.Errorf("barrier %q in %s, want held: suspended", barrier, s)
				}
			case s == jobset.StateStarting:
				if barrier != "held: starting" {
					t.Errorf("barrier %q in %s, want held: starting", barrier, s)
				}
			case s == jobset.StateRunning && jobset.InPlaceActive(js):
				if barrier != "lifted" {
					t.Errorf("barrier %q of a synced group, want lifted", barrier)
				}
			default:
				if barrier == "held: restarting" || barrier == "held: suspended" {
					t.Errorf("barrier %q in %s", barrier, s)
				}
			}
		})
	}
}
