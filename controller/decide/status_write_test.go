package decide

import (
	"testing"
	"time"

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

// TestHoldCounters: after an in-place restart, while the group is synced
// but not every Job is ready again, a change of counters alone is held;
// the change that makes every Job ready, a decision, a first start and a
// JobSet that recreates are written.
func TestHoldCounters(t *testing.T) {
	counts := func(driver, workers int32) []jobset.ReplicatedJobStatus {
		return []jobset.ReplicatedJobStatus{{Name: "driver", Ready: driver}, {Name: "workers", Ready: workers}}
	}
	// Synced at t0, the restart completed: now is a minute later.
	now := t0.Add(time.Minute)
	recovering := func(js *jobset.JobSet, c []jobset.ReplicatedJobStatus) jobset.JobSetStatus {
		s := *js.Status.DeepCopy()
		s.InPlaceRestarts, s.Restarts, s.ReplicatedJobsStatus = 1, 1, c
		setCondition(&s, jobset.JobSetRestarting, metav1.ConditionFalse, ReasonInPlaceRestartDone, "synced", t0)
		return s
	}
	js := inPlaceJobSet(1, 2)
	cases := map[string]struct {
		js        *jobset.JobSet
		cur, next func(*jobset.JobSet) jobset.JobSetStatus
		// both, if set, changes cur and next alike.
		both func(*jobset.JobSetStatus)
		want bool
	}{
		"a Job unready after the release": {
			js:   js,
			cur:  func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 1)) },
			next: func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 0)) },
			want: true,
		},
		"a Job ready again, another not yet": {
			js:   js,
			cur:  func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(0, 0)) },
			next: func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 0)) },
			want: true,
		},
		"every Job ready again": {
			js:   js,
			cur:  func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 0)) },
			next: func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 1)) },
		},
		"a decision with the counters": {
			js:  js,
			cur: func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 1)) },
			next: func(js *jobset.JobSet) jobset.JobSetStatus {
				s := recovering(js, counts(1, 0))
				s.DeprecatedEpoch = 2
				return s
			},
		},
		// The cases below change the counters alone: cur and next differ
		// in nothing else, so only the condition decides.
		"a first start": {
			js:   js,
			both: func(s *jobset.JobSetStatus) { s.InPlaceRestarts, s.Restarts, s.Conditions = 0, 0, nil },
			cur:  func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 1)) },
			next: func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 0)) },
		},
		"a Job unready as the recovery window ends": {
			js: js,
			both: func(s *jobset.JobSetStatus) {
				s.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-RecoveryWindow))
			},
			cur:  func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 1)) },
			next: func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 0)) },
		},
		"a Job unready just within the recovery window": {
			js: js,
			both: func(s *jobset.JobSetStatus) {
				s.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-RecoveryWindow + time.Second))
			},
			cur:  func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 1)) },
			next: func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 0)) },
			want: true,
		},
		"a recreation after an in-place restart fell back": {
			js: js,
			both: func(s *jobset.JobSetStatus) {
				setCondition(s, jobset.JobSetRestarting, metav1.ConditionFalse, ReasonRestartJobsReady, MessageRestartJobsReady, t0)
			},
			cur:  func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(0, 0)) },
			next: func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 0)) },
		},
		"a JobSet that recreates": {
			js: func() *jobset.JobSet {
				js := js.DeepCopy()
				js.Spec.FailurePolicy.RestartStrategy = jobset.Recreate
				return js
			}(),
			cur:  func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 1)) },
			next: func(js *jobset.JobSet) jobset.JobSetStatus { return recovering(js, counts(1, 0)) },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cur, next := tc.cur(tc.js), tc.next(tc.js)
			if tc.both != nil {
				tc.both(&cur)
				tc.both(&next)
			}
			if !NeedsWrite(tc.js, cur, next) {
				t.Fatalf("NeedsWrite = false: the case changes nothing to write")
			}
			if got := HoldCounters(tc.js, cur, next, now); got != tc.want {
				t.Errorf("HoldCounters = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestCountersWait: counters held wait what is left of RecoveryHold since
// the first change held, and are written once it has passed.
func TestCountersWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   time.Duration
		want time.Duration
	}{
		{"the first hold waits the bound", 0, RecoveryHold},
		{"a later one what is left of it", 10 * time.Second, RecoveryHold - 10*time.Second},
		{"past the bound: write", RecoveryHold + time.Second, 0},
	} {
		if got := CountersWait(t0.Time, t0.Add(tc.at)); got != tc.want {
			t.Errorf("%s: CountersWait = %s, want %s", tc.name, got, tc.want)
		}
	}
}
