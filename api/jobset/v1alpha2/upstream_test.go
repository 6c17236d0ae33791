package v1alpha2

import "testing"

func TestUpstreamInPlaceRestarts(t *testing.T) {
	at := func(v int32) *int32 { return &v }
	cases := map[string]struct {
		status JobSetStatus
		want   int32
	}{
		"never restarted in place":              {JobSetStatus{CurrentInPlaceRestartAttempt: at(0)}, 0},
		"restarted in place twice":              {JobSetStatus{PreviousInPlaceRestartAttempt: at(1), CurrentInPlaceRestartAttempt: at(2)}, 2},
		"a restart under way":                   {JobSetStatus{PreviousInPlaceRestartAttempt: at(2), CurrentInPlaceRestartAttempt: at(2)}, 3},
		"a recreation among them":               {JobSetStatus{Restarts: 1, RestartsCountTowardsMax: 1, CurrentInPlaceRestartAttempt: at(3)}, 2},
		"a Job recreated alone among them":      {JobSetStatus{CurrentInPlaceRestartAttempt: at(3), ReplicatedJobsStatus: []ReplicatedJobStatus{{Name: "w", JobRestarts: []int32{0, 1}}}}, 2},
		"recreated before the first sync":       {JobSetStatus{Restarts: 2, CurrentInPlaceRestartAttempt: at(1)}, 0},
		"written by inplace":                    {JobSetStatus{SyncedEpoch: 3, DeprecatedEpoch: 2, PreviousInPlaceRestartAttempt: at(1), CurrentInPlaceRestartAttempt: at(2)}, 0},
		"no attempt: not an InPlaceRestart one": {JobSetStatus{Restarts: 1}, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := UpstreamInPlaceRestarts(&tc.status); got != tc.want {
				t.Errorf("UpstreamInPlaceRestarts = %d, want %d", got, tc.want)
			}
		})
	}
	deprecated, synced := UpstreamEpochs(&JobSetStatus{PreviousInPlaceRestartAttempt: at(1), CurrentInPlaceRestartAttempt: at(2)})
	if deprecated != 2 || synced != 3 {
		t.Errorf("UpstreamEpochs = %d, %d; want 2, 3", deprecated, synced)
	}
}
