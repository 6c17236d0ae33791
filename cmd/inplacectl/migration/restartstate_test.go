package migration

import (
	"os"
	"testing"

	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// restartStateCase is a JobSet of the API's restart-state fixtures and
// the state it is in.
type restartStateCase struct {
	Name   string              `json:"name"`
	State  jobset.RestartState `json:"state"`
	JobSet jobset.JobSet       `json:"jobSet"`
}

// inplacectl migrate says a restart is under way where the restart state
// does (Restarting, Recreating), and where upstream's in-place restart,
// which sets no condition inplace reads, leaves its attempt deprecated
// with none synced after it (Starting). Not for a suspended JobSet, nor
// one starting under inplace.
func TestRestartUnderWayAgreesWithTheRestartState(t *testing.T) {
	data, err := os.ReadFile("../../../api/jobset/v1alpha2/testdata/restart-states.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []restartStateCase
	if err := yaml.UnmarshalStrict(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			js := &tc.JobSet
			s := jobset.RestartStateOf(js, &js.Status)
			upstreamRestarting := s == jobset.StateStarting && jobset.WrittenByUpstream(&js.Status) && js.Status.CurrentInPlaceRestartAttempt != nil
			why := restartUnderWay(JobSet{JobSet: js})
			if want := s.RestartUnderWay() || upstreamRestarting; (why != "") != want {
				t.Errorf("restart under way %q in %s, want one: %t", why, s, want)
			}
		})
	}
}
