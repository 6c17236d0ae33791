package reconciler

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics are the policy reconciler's and the audit's collectors. A nil
// *Metrics counts nothing.
type Metrics struct {
	compileErrors   *prometheus.CounterVec
	auditViolations *prometheus.GaugeVec
	auditSeconds    prometheus.Gauge
	auditJobSets    prometheus.Gauge
	auditIncomplete prometheus.Counter
}

// NewMetrics registers the collectors on reg; nil means controller-runtime's
// registry, which the manager's metrics endpoint serves.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	m := &Metrics{
		compileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inplace_policy_compile_errors_total",
			Help: "JobSetPolicy versions that failed to compile, by policy.",
		}, []string{"policy"}),
		auditViolations: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "inplace_policy_audit_violations",
			Help: "Violations found by the last audit, by policy.",
		}, []string{"policy"}),
		auditSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inplace_policy_audit_duration_seconds",
			Help: "How long the last audit took.",
		}),
		auditJobSets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inplace_policy_audit_jobsets",
			Help: "JobSets the last audit had to evaluate.",
		}),
		auditIncomplete: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inplace_policy_audit_incomplete_total",
			Help: "Audits that ran out of their time budget before they reached every JobSet.",
		}),
	}
	for _, c := range []prometheus.Collector{m.compileErrors, m.auditViolations, m.auditSeconds, m.auditJobSets, m.auditIncomplete} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the policy reconciler's metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) countCompileError(policy string) {
	if m != nil {
		m.compileErrors.WithLabelValues(policy).Inc()
	}
}

func (m *Metrics) setAuditViolations(policy string, n int) {
	if m != nil {
		m.auditViolations.WithLabelValues(policy).Set(float64(n))
	}
}

func (m *Metrics) observeAudit(took time.Duration, jobsets int, complete bool) {
	if m == nil {
		return
	}
	m.auditSeconds.Set(took.Seconds())
	m.auditJobSets.Set(float64(jobsets))
	if !complete {
		m.auditIncomplete.Inc()
	}
}
