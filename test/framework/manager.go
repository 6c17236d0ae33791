package framework

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	managerapp "github.com/inplace-dev/inplace/cmd/manager/app"
	"github.com/inplace-dev/inplace/test/deploy"
)

// StartManager runs inplace-manager in-process, built by the same calls as
// cmd/manager, with leader election and the metrics and probe endpoints
// off; on the full cluster it authenticates as the service account of
// config/rbac, with no more rights than config/rbac grants. It returns once the caches are synced; StopManager stops it.
func (f *Framework) StartManager(cfg *rest.Config) {
	ginkgo.GinkgoHelper()
	ctrl.SetLogger(zap.New(zap.WriteTo(ginkgo.GinkgoWriter), zap.UseDevMode(true)))
	conf, err := configv1alpha1.Load("")
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	conf.LeaderElection.LeaderElect = ptr.To(false)
	conf.Metrics.BindAddress = "0"
	conf.Health.ProbeBindAddress = "0"
	conf.Webhook.Disabled = !f.Webhooks
	if f.Webhooks {
		f.setupWebhooks(cfg, conf)
	}
	if f.Configure != nil {
		f.Configure(conf)
	}

	mgrCfg := rest.CopyConfig(cfg)
	if f.FullCluster {
		// On the full cluster the manager runs as its own service account
		// with the RBAC of config/rbac, as it does when installed.
		var err error
		mgrCfg, err = deploy.ManagerConfig(context.Background(), cfg, 24*time.Hour)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
	}
	mgrCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			// Writes to the webhook configurations (the caBundle of
			// self-signed certificates) are setup, not reconciliation.
			if req.Method != http.MethodGet && !strings.Contains(req.URL.Path, "/admissionregistration.k8s.io/") {
				f.writesMu.Lock()
				f.writes = append(f.writes, req.Method+" "+req.URL.Path)
				f.writesMu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	opts := managerapp.Options(conf, managerapp.NewScheme())
	// The suite starts several managers in one process over its life.
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(mgrCfg, opts)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	f.metrics = prometheus.NewRegistry()
	gomega.Expect(managerapp.Setup(mgr, conf, f.metrics)).To(gomega.Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer ginkgo.GinkgoRecover()
		defer close(done)
		gomega.Expect(mgr.Start(ctx)).To(gomega.Succeed())
	}()
	f.stopManager = func() {
		cancel()
		gomega.Eventually(done).WithTimeout(30 * time.Second).Should(gomega.BeClosed())
	}
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	gomega.Expect(mgr.GetCache().WaitForCacheSync(syncCtx)).To(gomega.BeTrue(), "manager caches did not sync")
	if f.Webhooks {
		f.waitForWebhooks(cfg)
	}
}

// ManagerWrites lists the requests other than GET (creates, updates,
// patches, deletes, Events) that managers started by StartManager sent, as
// "METHOD path", in order.
func (f *Framework) ManagerWrites() []string {
	f.writesMu.Lock()
	defer f.writesMu.Unlock()
	return slices.Clone(f.writes)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// StopManager stops the manager StartManager started and waits until it
// has returned.
func (f *Framework) StopManager() {
	ginkgo.GinkgoHelper()
	if f.stopManager != nil {
		f.stopManager()
		f.stopManager = nil
	}
}
