package decide

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

	// During an in-place restart (its condition set with the deprecated
	// epoch, as the controller sets them) a change of counters only waits
	// for the restart's end; a decision does not.
	js := inPlaceJobSet(1, 1)
	restarting := jobset.JobSetStatus{SyncedEpoch: 1, DeprecatedEpoch: 1, ReplicatedJobsStatus: a.ReplicatedJobsStatus}
	setCondition(&restarting, jobset.JobSetRestarting, metav1.ConditionTrue, ReasonInPlaceRestart, "in-place restart 1", t0)
	counted := *restarting.DeepCopy()
	counted.ReplicatedJobsStatus = []jobset.ReplicatedJobStatus{{Name: "w", Ready: 2}}
	if NeedsWrite(js, restarting, counted) {
		t.Errorf("a change of counters only during an in-place restart is written")
	}
	decided := *restarting.DeepCopy()
	decided.ReplicatedJobsStatus = []jobset.ReplicatedJobStatus{{Name: "w", Ready: 3, JobRestarts: []int32{1}, JobRestartsCountTowardsMax: []int32{1}}}
	if !NeedsWrite(js, restarting, decided) {
		t.Errorf("a Job's restart during an in-place restart is not written")
	}
	if !NeedsWrite(js, a, b) || NeedsWrite(js, a, a) {
		t.Errorf("outside an in-place restart: a change is not written, or no change is")
	}
}
