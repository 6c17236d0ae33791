package deploy

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	managerapp "github.com/inplace-dev/inplace/cmd/manager/app"
	"github.com/inplace-dev/inplace/test/cluster"
)

// RunManager runs inplace-manager in this process as it runs installed:
// as the service account of config/rbac, its webhooks registered from
// config/webhook (called by URL on a local port, with self-signed
// certificates), the agents' admission policy of config/agent installed
// as its kustomization lists it.
// Leader election and the metrics and probe endpoints are off. wrap, if
// set, wraps the manager's transport (to count its requests). The returned
// channel receives the manager's result when ctx ends or it fails. It
// returns once the webhooks admit.
func RunManager(ctx context.Context, admin *rest.Config, configure func(*configv1alpha1.Configuration), wrap func(*rest.Config)) (<-chan error, error) {
	conf, err := configv1alpha1.Load("")
	if err != nil {
		return nil, err
	}
	certDir, err := os.MkdirTemp("", "inplace-webhook-")
	if err != nil {
		return nil, err
	}
	go func() { <-ctx.Done(); os.RemoveAll(certDir) }()
	ports, err := cluster.FreePorts(1)
	if err != nil {
		return nil, err
	}
	port := ports[0]
	conf.LeaderElection.LeaderElect = ptr.To(false)
	conf.Metrics.BindAddress, conf.Health.ProbeBindAddress = "0", "0"
	conf.Webhook.Port, conf.Webhook.CertDir = port, certDir
	conf.Webhook.SelfSignedCerts, conf.Webhook.Hosts = true, []string{"127.0.0.1", "localhost"}
	if configure != nil {
		configure(conf)
	}
	mgrCfg, err := ManagerConfig(ctx, admin, 7*24*time.Hour)
	if err != nil {
		return nil, err
	}
	if wrap != nil {
		wrap(mgrCfg)
	}
	opts := managerapp.Options(conf, managerapp.NewScheme())
	// A process may run one manager after another (the restart benchmark
	// runs one per size); their controllers' names repeat.
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(mgrCfg, opts)
	if err != nil {
		return nil, err
	}
	if err := managerapp.Setup(mgr, conf, prometheus.NewRegistry()); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	c, err := client.New(admin, client.Options{Scheme: managerapp.NewScheme()})
	if err != nil {
		return nil, err
	}
	if err := ApplyKustomization(ctx, c, AgentPolicy); err != nil {
		return nil, err
	}
	if err := RegisterWebhooks(ctx, c, port); err != nil {
		return nil, err
	}
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		return nil, fmt.Errorf("inplace-manager: caches did not sync")
	}
	if !conf.Webhook.Disabled {
		if err := WaitForWebhooks(ctx, c, time.Minute); err != nil {
			return nil, fmt.Errorf("inplace-manager: %w", err)
		}
	}
	return done, nil
}
