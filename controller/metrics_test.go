package controller

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

func histogramCount(t *testing.T, m *restartMetrics) uint64 {
	t.Helper()
	var out dto.Metric
	if err := m.inPlaceRestartSeconds.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetHistogram().GetSampleCount()
}

func TestRestartMetrics(t *testing.T) {
	// A registry of its own: the counts start at zero whatever else runs.
	m, err := newRestartMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	js := inPlaceJobSet(1, 1)
	js.UID = "u1"
	t0 := time.Unix(1000, 0)

	// Epoch 1 deprecated: one in-place restart begins.
	before := jobset.JobSetStatus{SyncedEpoch: 1}
	during := jobset.JobSetStatus{SyncedEpoch: 1, DeprecatedEpoch: 1, Restarts: 1, InPlaceRestarts: 1}
	m.written(js, before, during, t0)
	if got := testutil.ToFloat64(m.restartsTotal.WithLabelValues(kindInPlace)); got != 1 {
		t.Errorf("in-place restarts counted %v, want 1", got)
	}
	if got := histogramCount(t, m); got != 0 {
		t.Errorf("a duration observed before the restart completed")
	}
	// Epoch 2 synced 1.5 s later: the restart took 1.5 s.
	done := during
	done.SyncedEpoch = 2
	m.written(js, during, done, t0.Add(1500*time.Millisecond))
	if got := histogramCount(t, m); got != 1 {
		t.Errorf("durations observed %d, want 1", got)
	}
	// A later write without a transition observes nothing more.
	m.written(js, done, done, t0.Add(3*time.Second))
	if got := histogramCount(t, m); got != 1 {
		t.Errorf("durations observed %d, want 1", got)
	}
	if got := testutil.ToFloat64(m.restartsTotal.WithLabelValues(kindRecreate)); got != 0 {
		t.Errorf("an in-place restart counted as recreate")
	}

	// A Job failure under InPlaceRestart recreates: counted as recreate.
	recreated := done
	recreated.Restarts++
	m.written(js, done, recreated, t0.Add(4*time.Second))
	if got := testutil.ToFloat64(m.restartsTotal.WithLabelValues(kindRecreate)); got != 1 {
		t.Errorf("recreates counted %v, want 1", got)
	}

	// The timeout fallback is counted once.
	timedOut := recreated
	timedOut.Conditions = []metav1.Condition{{Type: string(jobset.JobSetRestarting), Status: metav1.ConditionTrue, Reason: ReasonInPlaceRestartTimedOut}}
	m.written(js, recreated, timedOut, t0)
	m.written(js, timedOut, timedOut, t0)
	if got := testutil.ToFloat64(m.inPlaceFallbacksTotal); got != 1 {
		t.Errorf("fallbacks counted %v, want 1", got)
	}

	js.Status = done
	m.epochs(js)
	if got := testutil.ToFloat64(m.epochGauge.WithLabelValues(js.Namespace, js.Name, "synced")); got != 2 {
		t.Errorf("synced epoch gauge %v, want 2", got)
	}
	m.gone(types.NamespacedName{Namespace: js.Namespace, Name: js.Name})
	if n := testutil.CollectAndCount(m.epochGauge); n != 0 {
		t.Errorf("%d epoch series left for a deleted JobSet", n)
	}
}

func TestCountersOnlyWritesAreCoalesced(t *testing.T) {
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

	w := newJobSetTimes()
	key := types.NamespacedName{Namespace: "ns", Name: "js"}
	t0 := time.Unix(100, 0)
	if d := w.writeWait(key, t0); d != 0 {
		t.Errorf("a first write waits %v", d)
	}
	w.wrote(key, t0)
	if d := w.writeWait(key, t0.Add(300*time.Millisecond)); d != 700*time.Millisecond {
		t.Errorf("a write 300ms after the last waits %v, want 700ms", d)
	}
	if d := w.writeWait(key, t0.Add(2*time.Second)); d != 0 {
		t.Errorf("a write 2s after the last waits %v", d)
	}
	w.forget(key)
	if d := w.writeWait(key, t0); d != 0 {
		t.Errorf("a deleted JobSet's writes still wait %v", d)
	}
}

func TestInPlaceRestarting(t *testing.T) {
	for _, tc := range []struct {
		deprecated, synced int32
		want               bool
	}{{0, 0, false}, {0, 1, false}, {1, 1, true}, {1, 2, false}, {2, 2, true}} {
		if got := inPlaceRestarting(jobset.JobSetStatus{DeprecatedEpoch: tc.deprecated, SyncedEpoch: tc.synced}); got != tc.want {
			t.Errorf("deprecated %d synced %d: %v, want %v", tc.deprecated, tc.synced, got, tc.want)
		}
	}
}
