package webhook

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// admissionMetrics are the webhooks' own collectors, registered by Setup on
// the registry it is given; handlers built with NewMutator or NewValidator
// alone count nothing.
type admissionMetrics struct {
	seconds *prometheus.HistogramVec
	total   *prometheus.CounterVec
}

func newAdmissionMetrics(reg prometheus.Registerer) (*admissionMetrics, error) {
	m := &admissionMetrics{
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "inplace_admission_duration_seconds",
			Help: "Time to handle one admission request, by webhook (mutate, validate, validate-policy).",
			// 2 s is the threshold of the alert InplaceWebhookSlow
			// (config/prometheus): a quantile is exact at a bucket's bound.
			Buckets: []float64{100e-6, 250e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 50e-3, 250e-3, 1, 2, 5, 10},
		}, []string{"webhook"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inplace_admission_requests_total",
			Help: "Admission requests, by webhook and whether they were allowed.",
		}, []string{"webhook", "allowed", "code"}),
	}
	for _, c := range []prometheus.Collector{m.seconds, m.total} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the webhooks' metrics: %w", err)
		}
	}
	return m, nil
}

func (m *admissionMetrics) observe(webhook string, resp admission.Response, d time.Duration) {
	if m == nil {
		return
	}
	m.seconds.WithLabelValues(webhook).Observe(d.Seconds())
	code := int32(200)
	if resp.Result != nil && resp.Result.Code != 0 {
		code = resp.Result.Code
	}
	m.total.WithLabelValues(webhook, strconv.FormatBool(resp.Allowed), strconv.Itoa(int(code))).Inc()
}
