package deploy

import (
	"context"
	"fmt"
	"net"
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
// the JobSet controller and the admission server as two managers, each as
// its service account of config/rbac; the webhooks registered from
// config/webhook (called by URL on a local port, with self-signed
// certificates), the agents' admission policy of config/agent installed
// as its kustomization lists it, and the webhooks' exemption guard. With
// InstallCRDs, which the caller runs first, that is the local install
// (LocalFiles).
// Leader election and the metrics and probe endpoints are off. wrap, if
// set, wraps the controller's transport (to count its requests); opts are
// given to managerapp.Setup. The returned channel receives the first
// manager's result when ctx ends or one fails. It returns once the webhooks admit.
func RunManager(ctx context.Context, admin *rest.Config, configure func(*configv1alpha1.Configuration), wrap func(*rest.Config), opts ...managerapp.SetupOption) (<-chan error, error) {
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
	done := make(chan error, 2)
	var mgrs []ctrl.Manager
	for _, role := range Roles(conf) {
		mgrCfg, err := ManagerConfig(ctx, admin, ServiceAccount(role), 7*24*time.Hour)
		if err != nil {
			return nil, err
		}
		if wrap != nil && role == managerapp.RoleController {
			wrap(mgrCfg)
		}
		mgr, err := StartManager(ctx, mgrCfg, conf, role, prometheus.NewRegistry(), done, opts...)
		if err != nil {
			return nil, err
		}
		mgrs = append(mgrs, mgr)
	}
	c, err := client.New(admin, client.Options{Scheme: managerapp.NewScheme()})
	if err != nil {
		return nil, err
	}
	if err := RegisterAdmission(ctx, c, port); err != nil {
		return nil, err
	}
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, mgr := range mgrs {
		if !mgr.GetCache().WaitForCacheSync(syncCtx) {
			return nil, fmt.Errorf("inplace-manager: caches did not sync")
		}
	}
	if !conf.Webhook.Disabled {
		if err := WaitForWebhooks(ctx, c, time.Minute); err != nil {
			return nil, fmt.Errorf("inplace-manager: %w", err)
		}
	}
	return done, nil
}

// Roles lists the managers that run what conf enables, as installed: the
// JobSet controller and the admission server apart.
func Roles(conf *configv1alpha1.Configuration) []string {
	var roles []string
	if !conf.Controller.Disabled {
		roles = append(roles, managerapp.RoleController)
	}
	if !conf.Webhook.Disabled {
		roles = append(roles, managerapp.RoleWebhook)
	}
	return roles
}

// StartManager starts a manager of role in this process, built by the same
// calls as cmd/manager, authenticating with cfg and registering its
// metrics on reg; conf is not changed. done receives its result when ctx
// ends or it fails. setup is given to managerapp.Setup.
func StartManager(ctx context.Context, cfg *rest.Config, conf *configv1alpha1.Configuration, role string, reg prometheus.Registerer, done chan<- error, setup ...managerapp.SetupOption) (ctrl.Manager, error) {
	roleConf := *conf
	if err := managerapp.ApplyRole(&roleConf, role); err != nil {
		return nil, err
	}
	if err := localReports(&roleConf); err != nil {
		return nil, err
	}
	opts := managerapp.Options(&roleConf, managerapp.NewScheme())
	// A process may run one manager after another (the restart benchmark
	// runs one per size, suites restart theirs); their controllers' names
	// repeat.
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := managerapp.Setup(mgr, &roleConf, reg, setup...); err != nil {
		return nil, err
	}
	go func() { done <- mgr.Start(ctx) }()
	return mgr, nil
}

// localReports has a manager that runs in this process serve the agents'
// reports where the local cluster's agents reach it, unless the
// configuration says where: on the real nodes' bridge where this
// process's cluster has real nodes (their Pods route to it, and the
// simulated nodes' agents in this process reach it as well), or else on
// loopback: never on the bridge of another process's cluster, which
// goes, with the address, when that cluster stops. Each start gets a free port, as a
// new leader gets a new Pod IP.
func localReports(conf *configv1alpha1.Configuration) error {
	r := &conf.Agent.Reports
	if r.Disabled || r.AdvertiseAddress != "" || conf.Controller.Disabled {
		return nil
	}
	host := "127.0.0.1"
	if cluster.OnBridge() {
		host = cluster.BridgeIP
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return fmt.Errorf("finding a port for agent reports: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return err
	}
	r.BindAddress, r.AdvertiseAddress = addr, addr
	return nil
}

// RegisterAdmission installs what the admission server needs beside it:
// the agents' admission policy, the webhooks' exemption guard, and the
// webhook configurations, called by URL on port of this host.
func RegisterAdmission(ctx context.Context, c client.Client, port int) error {
	policies, err := admissionPolicies()
	if err != nil {
		return err
	}
	if err := Apply(ctx, c, policies...); err != nil {
		return err
	}
	return RegisterWebhooks(ctx, c, port)
}

// RemoveAdmission deletes what RegisterAdmission installed, once the
// managers have stopped: webhooks that fail closed on a manager no longer
// running would refuse every JobSet and Pod another controller's install
// admits.
func RemoveAdmission(ctx context.Context, c client.Client) error {
	policies, err := admissionPolicies()
	if err != nil {
		return err
	}
	objs, err := Objects(append(policies, WebhookConfigurations)...)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := client.IgnoreNotFound(c.Delete(ctx, obj)); err != nil {
			return fmt.Errorf("deleting %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}
