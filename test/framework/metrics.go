package framework

import (
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics gathers the registries of the managers StartManager last
// started. Each manager registers its metrics on a registry of its own, so
// a suite reads what its managers counted and nothing another manager in
// the same process (or a parallel process on the same cluster) did.
func (f *Framework) Metrics() prometheus.Gatherer {
	ginkgo.GinkgoHelper()
	gomega.Expect(f.metrics).NotTo(gomega.BeEmpty(), "no manager started")
	return f.metrics
}

// MetricValue reads a metric from g: a counter's or gauge's value, or a
// histogram's sample count, summed over the series whose labels match the
// given name/value pairs (an empty name matches every series).
func MetricValue(g prometheus.Gatherer, name string, labels ...string) float64 {
	ginkgo.GinkgoHelper()
	families, err := g.Gather()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if labels[i] == "" {
					continue
				}
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == labels[i] && l.GetValue() == labels[i+1])
				}
				if !found {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Histogram != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}
