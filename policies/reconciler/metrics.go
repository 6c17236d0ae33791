package reconciler

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics are the policy reconciler's and the audit's collectors. A nil
// *Metrics counts nothing.
type Metrics struct {
	compileErrors   *prometheus.CounterVec
	auditViolations *prometheus.GaugeVec
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
	}
	for _, c := range []prometheus.Collector{m.compileErrors, m.auditViolations} {
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
