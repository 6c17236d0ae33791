package coexist

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

func TestServedProbe(t *testing.T) {
	current := jobset.JobSetStatus{
		Restarts: 2, InPlaceRestarts: 2, RestartsCountTowardsMax: 2, SyncedEpoch: 3,
		CurrentInPlaceRestartAttempt: ptr.To[int32](2),
	}
	sent := ServedProbe(current)
	want := jobset.JobSetStatus{
		Restarts: 3, InPlaceRestarts: 3, RestartsCountTowardsMax: 3, SyncedEpoch: 4, DeprecatedEpoch: 1, SyncedPods: 1,
		CurrentInPlaceRestartAttempt: ptr.To[int32](2),
	}
	if !equality.Semantic.DeepEqual(sent, want) {
		t.Fatalf("ServedProbe(%+v) = %+v, want every counter moved on by one, the rest as it was: %+v", current, sent, want)
	}
	if got := Dropped(sent, sent); len(got) != 0 {
		t.Errorf("Dropped(sent, sent) = %v, want none", got)
	}
	// As upstream's schema prunes it: the counters upstream has kept, ours
	// gone.
	pruned := sent
	pruned.InPlaceRestarts, pruned.SyncedEpoch, pruned.DeprecatedEpoch, pruned.SyncedPods = 0, 0, 0, 0
	got := Dropped(sent, pruned)
	wantDropped := []string{"status.inPlaceRestarts", "status.deprecatedEpoch", "status.syncedEpoch", "status.syncedPods"}
	if !slices.Equal(got, wantDropped) {
		t.Errorf("Dropped = %v, want %v", got, wantDropped)
	}
}
