package framework

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	managerapp "github.com/inplace-dev/inplace/cmd/manager/app"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
)

// StartManager runs inplace-manager in-process, built by the same calls as
// cmd/manager, with the metrics and probe endpoints off and leader
// election as LeaderElection says. On the full cluster it runs as
// installed: the JobSet controller and the admission server as two
// managers, each authenticating as its service account with no more rights
// than config/rbac grants it; on envtest, one manager of both roles as the
// admin. It returns once the caches are synced; StopManager stops it.
func (f *Framework) StartManager(cfg *rest.Config) {
	ginkgo.GinkgoHelper()
	ctrl.SetLogger(zap.New(zap.WriteTo(ginkgo.GinkgoWriter), zap.UseDevMode(true)))
	conf, err := configv1alpha1.Load("")
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	conf.LeaderElection.LeaderElect = ptr.To(f.LeaderElection)
	// No Deployment restarts these managers: a Lease lost because the
	// API server answered late (a loaded machine) would end the manager,
	// and with it every later spec. The specs stop managers with
	// StopManager, which releases the Lease once the manager has stopped,
	// so a longer term delays no successor unless that stop fails; then
	// the successor's wait for its election says so (below).
	conf.LeaderElection.LeaseDuration = &metav1.Duration{Duration: time.Minute}
	conf.LeaderElection.RenewDeadline = &metav1.Duration{Duration: 45 * time.Second}
	// In the namespace of the service accounts' Leases.
	conf.LeaderElection.ResourceNamespace = deploy.ManagerNamespace
	conf.Metrics.BindAddress = "0"
	conf.Health.ProbeBindAddress = "0"
	conf.Webhook.Disabled = !f.Webhooks
	if raceDetector {
		// The race detector's shadow memory counts in an evaluator
		// process's resident memory, several times its heap: a policy
		// that loops until its time limit would pass the default.
		conf.Policies.Evaluator.MemoryLimit = ptr.To(resource.MustParse("1Gi"))
	}
	if f.Webhooks {
		f.setupWebhooks(cfg, conf)
	}
	if f.Configure != nil {
		f.Configure(conf)
	}

	roles := []string{managerapp.RoleAll}
	if f.FullCluster {
		roles = deploy.Roles(conf)
	}
	ctx, cancel := context.WithCancel(context.Background())
	results := make(chan error, len(roles))
	done := make(chan error, len(roles))
	// stoppedEarly is closed when a manager stops before StopManager: the
	// wait for the election below ends with it.
	stoppedEarly := make(chan struct{})
	stopEarly := sync.OnceFunc(func() { close(stoppedEarly) })
	// A manager that stops before StopManager fails the spec running then,
	// not one a lost manager's silence times out later.
	go func() {
		defer ginkgo.GinkgoRecover()
		for range roles {
			err := <-results
			done <- err
			if ctx.Err() == nil {
				stopEarly()
				ginkgo.Fail(fmt.Sprintf("a manager stopped before StopManager: %v", err))
			}
		}
	}()
	f.metrics = nil
	var mgrs []ctrl.Manager
	for _, role := range roles {
		mgrCfg := rest.CopyConfig(cfg)
		if f.FullCluster {
			mgrCfg, err = deploy.ManagerConfig(context.Background(), cfg, deploy.ServiceAccount(role), 24*time.Hour)
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
		}
		mgrCfg.Wrap(f.recordWrites)
		reg := prometheus.NewRegistry()
		f.metrics = append(f.metrics, reg)
		roleConf := *conf
		if f.ServeMetrics {
			roleConf.Metrics.BindAddress = f.metricsAddress(role)
		}
		mgr, err := deploy.StartManager(ctx, mgrCfg, &roleConf, role, reg, results)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		mgrs = append(mgrs, mgr)
	}
	f.stopManager = func() {
		// A manager that failed to stop is not stopped again: a later
		// StartManager starts a new one, and no later StopManager waits
		// for an answer already taken.
		f.stopManager = nil
		cancel()
		var errs []error
		for range roles {
			select {
			case err := <-done:
				errs = append(errs, err)
			case <-time.After(45 * time.Second):
				errs = append(errs, errors.New("a manager did not stop within 45 s"))
			}
		}
		if err := errors.Join(errs...); err != nil {
			// A runnable that outlived the grace period is still running:
			// its stack says which call does not end.
			_ = pprof.Lookup("goroutine").WriteTo(ginkgo.GinkgoWriter, 1)
			ginkgo.Fail(fmt.Sprintf("stopping the manager: %v", err))
		}
	}
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	for _, mgr := range mgrs {
		gomega.Expect(mgr.GetCache().WaitForCacheSync(syncCtx)).To(gomega.BeTrue(), "manager caches did not sync")
	}
	if f.LeaderElection {
		// Each role leads under a Lease of its own. A predecessor that
		// did not release its Lease holds it for up to LeaseDuration: that
		// fails here, by name, not later as a spec's unconverged JobSet.
		elect := conf.LeaderElection.LeaseDuration.Duration + 30*time.Second
		deadline := time.After(elect)
		for i, mgr := range mgrs {
			select {
			case <-mgr.Elected():
			case <-stoppedEarly:
				return
			case <-deadline:
				// The role's Lease is named as the manager named it. The
				// role was started above, so it applies without error.
				named := *conf
				_ = managerapp.ApplyRole(&named, roles[i])
				ginkgo.Fail(fmt.Sprintf("the %s manager was not elected within %s: Lease %s/%s is held by another (a manager whose stop failed?), or the API server does not answer",
					roles[i], elect, named.LeaderElection.ResourceNamespace, named.LeaderElection.ResourceName))
			}
		}
	}
	if f.Webhooks {
		f.waitForWebhooks(cfg)
	}
}

// metricsAddress picks, once per role, the local port its manager serves
// metrics on.
func (f *Framework) metricsAddress(role string) string {
	ginkgo.GinkgoHelper()
	if f.metricsURLs == nil {
		f.metricsURLs = map[string]string{}
	}
	if _, ok := f.metricsURLs[role]; !ok {
		ports, err := cluster.FreePorts(1)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		f.metricsURLs[role] = fmt.Sprintf("https://127.0.0.1:%d/metrics", ports[0])
	}
	u, err := url.Parse(f.metricsURLs[role])
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return u.Host
}

// MetricsURL is where the manager of role (see deploy.Roles) serves its
// metrics, with ServeMetrics.
func (f *Framework) MetricsURL(role string) string {
	ginkgo.GinkgoHelper()
	u, ok := f.metricsURLs[role]
	gomega.Expect(ok).To(gomega.BeTrue(), "no manager of role %s serves metrics", role)
	return u
}

// recordWrites wraps a manager's transport to record its writes for
// ManagerWrites.
func (f *Framework) recordWrites(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		// Writes to the webhook configurations (the caBundle of
		// self-signed certificates) are setup, not reconciliation; a dry
		// run (the upstream gate's probe of the served schema) stores
		// nothing.
		if req.Method != http.MethodGet && !strings.Contains(req.URL.Path, "/admissionregistration.k8s.io/") && !req.URL.Query().Has("dryRun") {
			f.writesMu.Lock()
			f.writes = append(f.writes, req.Method+" "+req.URL.Path)
			f.writesMu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// ManagerWrites lists the requests other than GET and dry runs (creates,
// updates, patches, deletes, Events) that managers started by StartManager sent, as
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
	}
}
