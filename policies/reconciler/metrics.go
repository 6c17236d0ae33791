package reconciler

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	compileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "inplace_policy_compile_errors_total",
		Help: "JobSetPolicy versions that failed to compile, by policy.",
	}, []string{"policy"})

	auditViolations = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "inplace_policy_audit_violations",
		Help: "Violations found by the last audit, by policy.",
	}, []string{"policy"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(compileErrors, auditViolations)
}

func countCompileError(policy string) { compileErrors.WithLabelValues(policy).Inc() }

func setAuditViolations(policy string, n int) {
	auditViolations.WithLabelValues(policy).Set(float64(n))
}
