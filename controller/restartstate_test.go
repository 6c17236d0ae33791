package controller

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/decide"
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

			// The metrics time an in-place restart until the group syncs
			// (a scale's, which counts no restart, excepted): a sync ends
			// one only from Restarting. Begun before this process ran, it
			// is timed from its condition.
			m, err := newRestartMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			synced := *js.Status.DeepCopy()
			synced.Conditions = nil
			synced.SyncedEpoch = max(synced.SyncedEpoch, synced.DeprecatedEpoch) + 1
			m.written(js, js.Status, synced, time.Now())
			want := s.InPlaceRestarting() && reason(js.Status, jobset.JobSetRestarting) != decide.ReasonInPlaceScale
			if got := histogramCount(t, m) == 1; got != want {
				t.Errorf("the sync observed a restart's duration: %t, want %t in %s", got, want, s)
			}
		})
	}
}
