package policies

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are an engine's own collectors. An engine has none until
// RegisterMetrics is called (inplacectl runs offline and never does); the
// manager registers them on the registry its metrics endpoint serves.
type metrics struct {
	evaluationSeconds *prometheus.HistogramVec
	decisionsTotal    *prometheus.CounterVec
	failuresTotal     *prometheus.CounterVec
	evaluationsTotal  *prometheus.CounterVec
	evaluatorExits    *prometheus.CounterVec
}

// RegisterMetrics makes the engine count its evaluations and decisions on
// reg. Call it once, before the engine is used. The engine imports no
// controller-runtime, so it has no default registry: reg must be set.
func (e *Engine) RegisterMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return errors.New("the policy engine's metrics need a registry")
	}
	m := &metrics{
		evaluationSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "inplace_policy_evaluation_seconds",
			Help:    "Time to evaluate one policy on one JobSet.",
			Buckets: []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 5e-3, 25e-3, 100e-3, 1},
		}, []string{"policy"}),
		decisionsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inplace_policy_violations_total",
			Help: "Policy messages produced, by policy and by what they did (Deny, Warn, DryRun).",
		}, []string{"policy", "action"}),
		failuresTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inplace_policy_evaluation_failures_total",
			Help: "Policy evaluations that failed, by policy and by why (timeout, panic, error, crash: the evaluator process ended, memory: it passed its memory limit, unavailable: no evaluator process could take the evaluation in).",
		}, []string{"policy", "reason"}),
		evaluationsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inplace_policy_evaluations_total",
			Help: "Evaluations of a policy on a JobSet (or, for target PodTemplates, on one of its Pod templates), by policy and outcome: allow, deny, warn, dryrun (what its messages did; deny if any denied) or error (the evaluation failed).",
		}, []string{"policy", "outcome"}),
		evaluatorExits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inplace_policy_evaluator_exits_total",
			Help: "Policy evaluator processes that ended, by why: crash (it ended by itself: a Go fatal error, a kill by the kernel), memory (ended at its memory limit), timeout (ended when an evaluation, or taking a request in, did not stop at its time limit).",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.evaluationSeconds, m.decisionsTotal, m.failuresTotal, m.evaluationsTotal, m.evaluatorExits} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering the policy engine's metrics: %w", err)
		}
	}
	e.metrics = m
	return nil
}

func (m *metrics) observeEvaluation(policy string, d time.Duration) {
	if m != nil {
		m.evaluationSeconds.WithLabelValues(policy).Observe(d.Seconds())
	}
}

func (m *metrics) countDecision(policy string, action EnforcementAction) {
	if m != nil {
		m.decisionsTotal.WithLabelValues(policy, string(action)).Inc()
	}
}

func (m *metrics) countFailure(policy string, kind failureKind) {
	if m != nil {
		m.failuresTotal.WithLabelValues(policy, string(kind)).Inc()
	}
}

func (m *metrics) countEvaluatorExit(reason string) {
	if m != nil {
		m.evaluatorExits.WithLabelValues(reason).Inc()
	}
}

// Outcomes of one evaluation, for inplace_policy_evaluations_total.
const (
	outcomeAllow  = "allow"
	outcomeDeny   = "deny"
	outcomeWarn   = "warn"
	outcomeDryRun = "dryrun"
	outcomeError  = "error"
)

func (m *metrics) countEvaluation(policy, outcome string) {
	if m != nil {
		m.evaluationsTotal.WithLabelValues(policy, outcome).Inc()
	}
}

// outcome is what one evaluation's messages did, given the counts of d's
// messages before it: the strongest of them.
func outcome(d *Decision, denied, warned, dryRun int) string {
	switch {
	case len(d.Denied) > denied:
		return outcomeDeny
	case len(d.Warned) > warned:
		return outcomeWarn
	case len(d.DryRun) > dryRun:
		return outcomeDryRun
	}
	return outcomeAllow
}
