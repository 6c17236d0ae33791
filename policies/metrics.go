package policies

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	evaluationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "inplace_policy_evaluation_seconds",
		Help:    "Time to evaluate one policy on one JobSet.",
		Buckets: []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 5e-3, 25e-3},
	}, []string{"policy"})

	decisionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "inplace_policy_violations_total",
		Help: "Policy messages produced, by policy and by what they did (Deny, Warn, DryRun).",
	}, []string{"policy", "action"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(evaluationSeconds, decisionsTotal)
}

func observeEvaluation(policy string, d time.Duration) {
	evaluationSeconds.WithLabelValues(policy).Observe(d.Seconds())
}

func countDecision(policy string, action EnforcementAction) {
	decisionsTotal.WithLabelValues(policy, string(action)).Inc()
}
