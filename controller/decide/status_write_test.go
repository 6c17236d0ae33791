package decide

import (
	"testing"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

func TestStatusWrites(t *testing.T) {
	a := jobset.JobSetStatus{SyncedEpoch: 1, ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "w", Ready: 3}}}
	b := a
	b.ReplicatedJobsStatus = []jobset.ReplicatedJobStatus{{Name: "w", Ready: 2}}
	if !countersOnly(a, b) {
		t.Errorf("a change of counters only is not seen as one")
	}
	b.SyncedEpoch = 2
	if countersOnly(a, b) {
		t.Errorf("an epoch change is seen as counters only")
	}
	// A RestartJob decided during an in-place restart changes nothing but
	// a Job's restart count: it must be written, not held back.
	b = a
	b.ReplicatedJobsStatus = []jobset.ReplicatedJobStatus{{Name: "w", Ready: 3, JobRestarts: []int32{0, 1}, JobRestartsCountTowardsMax: []int32{0, 1}}}
	if countersOnly(a, b) {
		t.Errorf("a Job's restart is seen as counters only")
	}

	// During an in-place restart a change of counters only waits for the
	// restart's end; a decision does not.
	restarting := jobset.JobSetStatus{SyncedEpoch: 1, DeprecatedEpoch: 1, ReplicatedJobsStatus: a.ReplicatedJobsStatus}
	counted := restarting
	counted.ReplicatedJobsStatus = []jobset.ReplicatedJobStatus{{Name: "w", Ready: 2}}
	if NeedsWrite(restarting, counted) {
		t.Errorf("a change of counters only during an in-place restart is written")
	}
	decided := restarting
	decided.ReplicatedJobsStatus = []jobset.ReplicatedJobStatus{{Name: "w", Ready: 3, JobRestarts: []int32{1}, JobRestartsCountTowardsMax: []int32{1}}}
	if !NeedsWrite(restarting, decided) {
		t.Errorf("a Job's restart during an in-place restart is not written")
	}
	if !NeedsWrite(a, b) || NeedsWrite(a, a) {
		t.Errorf("outside an in-place restart: a change is not written, or no change is")
	}
}

func TestInPlaceRestarting(t *testing.T) {
	for _, tc := range []struct {
		deprecated, synced int32
		want               bool
	}{{0, 0, false}, {0, 1, false}, {1, 1, true}, {1, 2, false}, {2, 2, true}} {
		if got := InPlaceRestarting(jobset.JobSetStatus{DeprecatedEpoch: tc.deprecated, SyncedEpoch: tc.synced}); got != tc.want {
			t.Errorf("deprecated %d synced %d: %v, want %v", tc.deprecated, tc.synced, got, tc.want)
		}
	}
}
