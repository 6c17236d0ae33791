package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/decide"
	ctrltestutil "github.com/inplace-dev/inplace/controller/internal/testutil"
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
	js := ctrltestutil.InPlaceJobSet(1, 1)
	js.UID = "u1"
	t0 := time.Unix(1000, 0)

	// Epoch 1 deprecated: one in-place restart begins, its condition set
	// with it.
	before := jobset.JobSetStatus{SyncedEpoch: 1}
	during := jobset.JobSetStatus{SyncedEpoch: 1, DeprecatedEpoch: 1, Restarts: 1, InPlaceRestarts: 1,
		Conditions: []metav1.Condition{{Type: string(jobset.JobSetRestarting), Status: metav1.ConditionTrue, Reason: decide.ReasonInPlaceRestart}}}
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
	done.Conditions = []metav1.Condition{{Type: string(jobset.JobSetRestarting), Status: metav1.ConditionFalse, Reason: decide.ReasonInPlaceRestartDone}}
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
	timedOut.Conditions = []metav1.Condition{{Type: string(jobset.JobSetRestarting), Status: metav1.ConditionTrue, Reason: decide.ReasonInPlaceRestartTimedOut}}
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

// A restart every Pod made before it was decided is counted and synced in
// one write: when it began is not known, so no duration is observed.
func TestRestartMetricsOfARestartEveryPodMade(t *testing.T) {
	m, err := newRestartMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	js := ctrltestutil.InPlaceJobSet(1, 1)
	js.UID = "u1"
	before := jobset.JobSetStatus{SyncedEpoch: 1}
	after := jobset.JobSetStatus{SyncedEpoch: 2, DeprecatedEpoch: 1, Restarts: 1, InPlaceRestarts: 1}
	m.written(js, before, after, time.Unix(1000, 0))
	if got := testutil.ToFloat64(m.restartsTotal.WithLabelValues(kindInPlace)); got != 1 {
		t.Errorf("in-place restarts counted %v, want 1", got)
	}
	if got := histogramCount(t, m); got != 0 {
		t.Errorf("durations observed %d, want none", got)
	}
}

func TestImagePullMetrics(t *testing.T) {
	m, err := newRestartMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	js := ctrltestutil.InPlaceJobSet(0, 0)
	// series lists the gauge's series as namespace/jobset/container=value.
	series := func() []string {
		ch := make(chan prometheus.Metric, 10)
		m.imagePullGauge.Collect(ch)
		close(ch)
		var got []string
		for metric := range ch {
			var out dto.Metric
			if err := metric.Write(&out); err != nil {
				t.Fatal(err)
			}
			labels := map[string]string{}
			for _, l := range out.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got = append(got, fmt.Sprintf("%s/%s/%s=%v", labels["namespace"], labels["jobset"], labels["container"], out.GetGauge().GetValue()))
		}
		return got
	}
	of := func(container string) []string {
		return []string{js.Namespace + "/" + js.Name + "/" + container + "=1"}
	}
	for _, tc := range []struct {
		status, reason string
		want           []string
	}{
		{"", "", nil},
		{"True", decide.ReasonAgentImagePullFailed, of("agent")},
		{"True", decide.ReasonWorkerImagePullFailed, of("worker")},
		{"True", decide.ReasonAgentImagePullFailed, of("agent")},
		{"False", decide.ReasonImagePullResolved, nil},
		{"True", decide.ReasonWorkerImagePullFailed, of("worker")},
		{"False", decide.ReasonJobSetFinished, nil},
	} {
		js.Status.Conditions = nil
		if tc.status != "" {
			js.Status.Conditions = []metav1.Condition{{Type: string(jobset.JobSetImagePullFailure), Status: metav1.ConditionStatus(tc.status), Reason: tc.reason}}
		}
		m.imagePulls(js)
		if diff := cmp.Diff(tc.want, series()); diff != "" {
			t.Errorf("condition %s %s: series (-want +got):\n%s", tc.status, tc.reason, diff)
		}
	}
	js.Status.Conditions = []metav1.Condition{{Type: string(jobset.JobSetImagePullFailure), Status: metav1.ConditionTrue, Reason: decide.ReasonAgentImagePullFailed}}
	m.imagePulls(js)
	m.gone(types.NamespacedName{Namespace: js.Namespace, Name: js.Name})
	if n := testutil.CollectAndCount(m.imagePullGauge); n != 0 {
		t.Errorf("%d image pull series left for a deleted JobSet", n)
	}
	if m.imagePulls(ctrltestutil.JobSet("w", 1)); testutil.CollectAndCount(m.imagePullGauge) != 0 {
		t.Error("a JobSet without InPlaceRestart has image pull series")
	}
	disabled := ctrltestutil.InPlaceJobSet(0, 0)
	disabled.Annotations = map[string]string{jobset.DisableInPlaceRestartKey: "true"}
	if m.imagePulls(disabled); testutil.CollectAndCount(m.imagePullGauge) != 0 {
		t.Error("a JobSet with in-place restarts disabled has image pull series")
	}
}

// An in-place restart that ends otherwise than by its sync is not timed,
// nor is the sync of the group that follows: a suspension (the Pods that
// sync after the resume are new ones), a recreation after a Job's failure.
func TestRestartMetricsForgetARestartThatDidNotSync(t *testing.T) {
	restarting := metav1.Condition{Type: string(jobset.JobSetRestarting), Status: metav1.ConditionTrue, Reason: decide.ReasonInPlaceRestart}
	running := jobset.JobSetStatus{SyncedEpoch: 1}
	began := jobset.JobSetStatus{SyncedEpoch: 1, DeprecatedEpoch: 1, Restarts: 1, InPlaceRestarts: 1, Conditions: []metav1.Condition{restarting}}
	for name, ended := range map[string]jobset.JobSetStatus{
		"suspended": {SyncedEpoch: 1, DeprecatedEpoch: 1, Restarts: 1, InPlaceRestarts: 1, Conditions: []metav1.Condition{
			{Type: string(jobset.JobSetSuspended), Status: metav1.ConditionTrue, Reason: decide.ReasonSuspended},
			{Type: string(jobset.JobSetRestarting), Status: metav1.ConditionFalse, Reason: decide.ReasonInPlaceRestartSuspended}}},
		"recreated after a Job failed": {SyncedEpoch: 1, DeprecatedEpoch: 1, Restarts: 2, InPlaceRestarts: 1, Conditions: []metav1.Condition{
			{Type: string(jobset.JobSetRestarting), Status: metav1.ConditionTrue, Reason: decide.ReasonRestartDefaultPolicy}}},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := newRestartMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			js := ctrltestutil.InPlaceJobSet(1, 1)
			js.UID = "u1"
			t0 := time.Unix(1000, 0)
			m.written(js, running, began, t0)
			m.written(js, began, ended, t0.Add(time.Second))
			// Resumed, or the new Jobs' Pods up: the group syncs afresh.
			resumed := *ended.DeepCopy()
			resumed.Conditions = nil
			synced := resumed
			synced.SyncedEpoch = 2
			m.written(js, ended, resumed, t0.Add(time.Hour))
			m.written(js, resumed, synced, t0.Add(time.Hour+time.Second))
			if got := histogramCount(t, m); got != 0 {
				t.Errorf("durations observed %d, want none", got)
			}
		})
	}
}
