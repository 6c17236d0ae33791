package v1alpha2

import (
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

// restartStateCase is a JobSet of testdata/restart-states.yaml and the
// restart state it is in.
type restartStateCase struct {
	Name   string       `json:"name"`
	State  RestartState `json:"state"`
	JobSet JobSet       `json:"jobSet"`
}

func TestRestartStateOf(t *testing.T) {
	data, err := os.ReadFile("testdata/restart-states.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []restartStateCase
	if err := yaml.UnmarshalStrict(data, &cases); err != nil {
		t.Fatal(err)
	}
	seen := map[RestartState]bool{}
	for _, tc := range cases {
		seen[tc.State] = true
		t.Run(tc.Name, func(t *testing.T) {
			js := &tc.JobSet
			got := RestartStateOf(js, &js.Status)
			if got != tc.State {
				t.Fatalf("RestartStateOf = %s, want %s", got, tc.State)
			}
			// The narrower questions are the state's, and so is Finished,
			// which the controller asks first.
			if want := got == StateRestarting; got.InPlaceRestarting() != want {
				t.Errorf("InPlaceRestarting() = %t in %s", !want, got)
			}
			if want := got == StateRestarting || got == StateRecreating; got.RestartUnderWay() != want {
				t.Errorf("RestartUnderWay() = %t in %s", !want, got)
			}
			if want := got == StateFailed || got == StateCompleted; Finished(&js.Status) != want {
				t.Errorf("Finished = %t in %s", !want, got)
			}
		})
	}
	for _, s := range []RestartState{StateStarting, StateRunning, StateRestarting, StateRecreating, StateSuspended, StateFailed, StateCompleted} {
		if !seen[s] {
			t.Errorf("testdata/restart-states.yaml has no JobSet in state %s: every reader's test walks it", s)
		}
	}
}
