package webhook

import (
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/test/framework"
)

// webhookRequests counts the admission requests the suite's webhooks
// handled.
func webhookRequests() float64 {
	GinkgoHelper()
	return framework.MetricValue(fw.Metrics(), "inplace_admission_requests_total")
}

// recordingWarnings keeps the warnings the apiserver returned.
type recordingWarnings struct {
	mu   sync.Mutex
	list []string
}

func (r *recordingWarnings) HandleWarningHeader(_ int, _ string, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, text)
}

func (r *recordingWarnings) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.list...)
}

func clientWithWarnings(h rest.WarningHandler) client.Client {
	GinkgoHelper()
	c := rest.CopyConfig(cfg)
	c.WarningHandler = h
	cl, err := client.New(c, client.Options{Scheme: framework.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}
