package controller

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/decide"
)

// Restart kinds of inplace_jobset_restarts_total.
const (
	kindInPlace          = "in_place"
	kindRecreate         = "recreate"
	kindBlockingRecreate = "blocking_recreate"
)

// Containers of inplace_jobset_image_pull_failure: whose image cannot be
// pulled.
const (
	containerAgent  = "agent"
	containerWorker = "worker"
)

// restartMetrics turns status transitions, once written, into metrics. A
// transition is seen once: the status write that carries it is an Update
// with the resourceVersion read, so a stale decision never lands twice.
//
// Its collectors belong to it, registered on the registry it is given, so
// that two managers in one process (the tests start several) each count
// their own.
type restartMetrics struct {
	restartsTotal         *prometheus.CounterVec
	inPlaceFallbacksTotal prometheus.Counter
	inPlaceRestartSeconds prometheus.Histogram
	epochGauge            *prometheus.GaugeVec
	imagePullGauge        *prometheus.GaugeVec

	mu sync.Mutex
	// started is when each JobSet's in-place restart in progress began, as
	// this process saw it; after a manager restart the condition's time
	// stands in.
	started map[types.UID]time.Time
}

func newRestartMetrics(reg prometheus.Registerer) (*restartMetrics, error) {
	m := &restartMetrics{
		restartsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inplace_jobset_restarts_total",
			Help: "JobSet restarts, by kind: in_place (every container restarted in its Pod), recreate and blocking_recreate (Jobs and Pods recreated).",
		}, []string{"kind"}),
		inPlaceFallbacksTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inplace_inplace_restart_fallbacks_total",
			Help: "In-place restarts that did not converge within the timeout and fell back to Recreate.",
		}),
		inPlaceRestartSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "inplace_inplace_restart_duration_seconds",
			Help:    "From an epoch deprecated to the next epoch synced (every Pod restarted and reporting it), as the controller saw it.",
			Buckets: []float64{0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300},
		}),
		epochGauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "inplace_jobset_epoch",
			Help: "The epochs of an InPlaceRestart JobSet: synced (every Pod at it) and deprecated (the last one restarted away from).",
		}, []string{"namespace", "jobset", "epoch"}),
		imagePullGauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "inplace_jobset_image_pull_failure",
			Help: "1 while Pods of an InPlaceRestart JobSet wait for an image the kubelet cannot pull (its ImagePullFailure condition is True), by the container whose image it is: agent or worker. No series otherwise.",
		}, []string{"namespace", "jobset", "container"}),
		started: map[types.UID]time.Time{},
	}
	for _, c := range []prometheus.Collector{m.restartsTotal, m.inPlaceFallbacksTotal, m.inPlaceRestartSeconds, m.epochGauge, m.imagePullGauge} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the controller's metrics: %w", err)
		}
	}
	return m, nil
}

// written records what changed between the status read and the status
// written. An in-place restart is timed while the restart state says one
// is under way (jobset.RestartStateOf): from the write that counts it
// until the write that leaves Restarting, observed when that is the sync
// (Running). One that ends otherwise (suspended, recreated on its timeout
// or a Job's failure, finished) is forgotten: a later sync is another
// group's. A scale restarts in place uncounted, and is not timed.
func (m *restartMetrics) written(js *jobset.JobSet, before, after jobset.JobSetStatus, now time.Time) {
	from, to := jobset.RestartStateOf(js, &before), jobset.RestartStateOf(js, &after)
	inPlace := after.InPlaceRestarts - before.InPlaceRestarts
	if inPlace > 0 {
		m.restartsTotal.WithLabelValues(kindInPlace).Add(float64(inPlace))
		// Counted without Restarting: every Pod restarted before the
		// restart was decided, and it synced in the same write; when it
		// began is not known. No duration.
		if to.InPlaceRestarting() {
			m.mu.Lock()
			m.started[js.UID] = now
			m.mu.Unlock()
		}
	}
	if recreated := after.Restarts - before.Restarts - inPlace; recreated > 0 {
		kind := kindRecreate
		if js.Spec.FailurePolicy != nil && js.Spec.FailurePolicy.RestartStrategy == jobset.BlockingRecreate {
			kind = kindBlockingRecreate
		}
		m.restartsTotal.WithLabelValues(kind).Add(float64(recreated))
	}
	if reason(after, jobset.JobSetRestarting) == decide.ReasonInPlaceRestartTimedOut && reason(before, jobset.JobSetRestarting) != decide.ReasonInPlaceRestartTimedOut {
		m.inPlaceFallbacksTotal.Inc()
	}
	if !from.InPlaceRestarting() || to.InPlaceRestarting() {
		return
	}
	m.mu.Lock()
	start, ok := m.started[js.UID]
	delete(m.started, js.UID)
	m.mu.Unlock()
	if to != jobset.StateRunning {
		return
	}
	if !ok {
		// Begun before this process ran: the condition's time stands in,
		// for a counted restart (not a scale's).
		if c := meta.FindStatusCondition(before.Conditions, string(jobset.JobSetRestarting)); c != nil && c.Reason == decide.ReasonInPlaceRestart {
			start, ok = c.LastTransitionTime.Time, true
		}
	}
	if ok {
		m.inPlaceRestartSeconds.Observe(now.Sub(start).Seconds())
	}
}

// epochs publishes a JobSet's epochs.
func (m *restartMetrics) epochs(js *jobset.JobSet) {
	if !jobset.InPlace(js) {
		return
	}
	m.epochGauge.WithLabelValues(js.Namespace, js.Name, "synced").Set(float64(js.Status.SyncedEpoch))
	m.epochGauge.WithLabelValues(js.Namespace, js.Name, "deprecated").Set(float64(js.Status.DeprecatedEpoch))
}

// imagePulls publishes whether an InPlaceRestart JobSet's Pods wait for an
// image, from its status: the agent's, which the manager's configuration
// names, or a worker's, which the JobSet's template does. A JobSet has a
// series only while its condition is True: most never wait, and a JobSet
// with in-place restarts disabled never has the condition.
func (m *restartMetrics) imagePulls(js *jobset.JobSet) {
	container := ""
	if c := meta.FindStatusCondition(js.Status.Conditions, string(jobset.JobSetImagePullFailure)); jobset.InPlace(js) && c != nil && c.Status == metav1.ConditionTrue {
		container = containerWorker
		if c.Reason == decide.ReasonAgentImagePullFailed {
			container = containerAgent
		}
	}
	for _, other := range []string{containerAgent, containerWorker} {
		if other != container {
			m.imagePullGauge.DeleteLabelValues(js.Namespace, js.Name, other)
		}
	}
	if container != "" {
		m.imagePullGauge.WithLabelValues(js.Namespace, js.Name, container).Set(1)
	}
}

// gone forgets a deleted JobSet.
func (m *restartMetrics) gone(key types.NamespacedName) {
	of := prometheus.Labels{"namespace": key.Namespace, "jobset": key.Name}
	m.epochGauge.DeletePartialMatch(of)
	m.imagePullGauge.DeletePartialMatch(of)
}

func reason(s jobset.JobSetStatus, t jobset.JobSetConditionType) string {
	if c := meta.FindStatusCondition(s.Conditions, string(t)); c != nil {
		return c.Reason
	}
	return ""
}
