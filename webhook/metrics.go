package webhook

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

var (
	admissionSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "inplace_admission_duration_seconds",
		Help:    "Time to handle one admission request, by webhook (mutate, validate).",
		Buckets: []float64{100e-6, 250e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 50e-3, 250e-3},
	}, []string{"webhook"})

	admissionTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "inplace_admission_requests_total",
		Help: "Admission requests, by webhook and whether they were allowed.",
	}, []string{"webhook", "allowed", "code"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(admissionSeconds, admissionTotal)
}

func observeAdmission(webhook string, resp admission.Response, d time.Duration) {
	admissionSeconds.WithLabelValues(webhook).Observe(d.Seconds())
	code := int32(200)
	if resp.Result != nil && resp.Result.Code != 0 {
		code = resp.Result.Code
	}
	admissionTotal.WithLabelValues(webhook, strconv.FormatBool(resp.Allowed), strconv.Itoa(int(code))).Inc()
}
