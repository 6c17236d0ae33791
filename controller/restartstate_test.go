package controller

import (
	"testing"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/internal/testutil"
)

// The controller's readers of the restart state agree with
// jobset.RestartStateOf on a JobSet of each state.
func TestControllerAgreesWithTheRestartState(t *testing.T) {
	for _, tc := range testutil.RestartStates(t) {
		t.Run(tc.Name, func(t *testing.T) {
			js := &tc.JobSet
			s := jobset.RestartStateOf(js, &js.Status)

			// The event handlers batch a JobSet's urgent events only
			// during an in-place restart.
			if got, want := jobSetStateOf(js).restarting, s.InPlaceRestarting(); got != want {
				t.Errorf("the event handlers see an in-place restart: %t, want %t in %s", got, want, s)
			}
		})
	}
}
