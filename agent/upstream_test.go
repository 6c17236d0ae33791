package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

func TestUpstreamBroadcast(t *testing.T) {
	jobSet := func(annotations map[string]any, strategy string, status map[string]any) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"annotations": annotations},
			"spec":     map[string]any{"failurePolicy": map[string]any{"restartStrategy": strategy}},
			"status":   status,
		}
	}
	for name, tc := range map[string]struct {
		js   map[string]any
		want protocol.Broadcast
		err  bool
	}{
		"no attempt yet": {js: jobSet(nil, "InPlaceRestart", nil), want: protocol.Broadcast{}},
		"attempts count from 0, epochs from 1": {
			js:   jobSet(nil, "InPlaceRestart", map[string]any{"previousInPlaceRestartAttempt": int64(0), "currentInPlaceRestartAttempt": int64(1)}),
			want: protocol.Broadcast{DeprecatedEpoch: 1, SyncedEpoch: 2},
		},
		"disabled by the annotation": {
			js:   jobSet(map[string]any{jobset.DisableInPlaceRestartKey: ""}, "InPlaceRestart", nil),
			want: protocol.Broadcast{Disabled: true},
		},
		"another restart strategy": {js: jobSet(nil, "Recreate", nil), want: protocol.Broadcast{Disabled: true}},
		"a negative attempt":       {js: jobSet(nil, "InPlaceRestart", map[string]any{"currentInPlaceRestartAttempt": int64(-1)}), err: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := UpstreamBroadcast(tc.js)
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want one: %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" && !tc.err {
				t.Errorf("broadcast (-want +got):\n%s", diff)
			}
		})
	}
}
