package report

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The results of inplace_policy_report_writes_total.
const (
	writeCreated = "created"
	writeUpdated = "updated"
	writeDeleted = "deleted"
	writeError   = "error"
)

// Metrics are the report writer's collectors. A nil *Metrics counts
// nothing.
type Metrics struct {
	writes  *prometheus.CounterVec
	enabled prometheus.Gauge
}

// NewMetrics registers the collectors on reg; nil means controller-runtime's
// registry, which the manager's metrics endpoint serves.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	m := &Metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inplace_policy_report_writes_total",
			Help: "Writes of the audit's PolicyReports, by result: created, updated, deleted or error.",
		}, []string{"result"}),
		enabled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inplace_policy_reports_enabled",
			Help: "1 if the last complete audit could write PolicyReports, 0 if their CRD (wgpolicyk8s.io/v1alpha2) is not installed.",
		}),
	}
	for _, c := range []prometheus.Collector{m.writes, m.enabled} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the policy report writer's metrics: %w", err)
		}
	}
	// Every result from the start, so that a rate of errors reads 0, not
	// nothing, before the first one.
	for _, r := range []string{writeCreated, writeUpdated, writeDeleted, writeError} {
		m.writes.WithLabelValues(r)
	}
	return m, nil
}

func (m *Metrics) countWrite(result string) {
	if m != nil {
		m.writes.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) setEnabled(enabled bool) {
	if m == nil {
		return
	}
	v := 0.0
	if enabled {
		v = 1
	}
	m.enabled.Set(v)
}
