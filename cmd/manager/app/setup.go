package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobsetv1alpha2 "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller"
	"github.com/inplace-dev/inplace/controller/reports"
	"github.com/inplace-dev/inplace/controller/reports/token"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/inventorysync"
	"github.com/inplace-dev/inplace/policies/reconciler"
	"github.com/inplace-dev/inplace/policies/report"
	"github.com/inplace-dev/inplace/webhook"
	"github.com/inplace-dev/inplace/webhook/selfsigned"
)

// NewScheme returns a scheme with the built-in types and the JobSet API.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(s))
	utilruntime.Must(policyv1alpha1.AddToScheme(s))
	return s
}

// Leader election reads, takes and renews (and on a clean stop, releases)
// a Lease in the manager's own namespace, and records an Event there when
// it becomes leader.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=inplace-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create,namespace=inplace-system
// The metrics endpoint authenticates and authorizes its scrapers.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Options returns the controller-runtime manager options for a
// configuration.
func Options(cfg *configv1alpha1.Configuration, scheme *runtime.Scheme) ctrl.Options {
	metrics := metricsserver.Options{
		BindAddress:   cfg.Metrics.BindAddress,
		SecureServing: ptr.Deref(cfg.Metrics.Secure, true),
		// Beside /metrics, behind the same authentication: which build
		// runs, for any identity the apiserver authenticates (the default
		// system:public-info-viewer role grants /version).
		ExtraHandlers: map[string]http.Handler{"/version": VersionHandler()},
	}
	if metrics.SecureServing {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	le := cfg.LeaderElection
	return ctrl.Options{
		// HTTP/2, as controller-runtime serves it: the API server sends
		// every admission request down one connection, so one replica
		// takes them all (until the connection is closed) and the others
		// stand by. Over HTTP/1.1 the replicas shared them evenly, but the
		// API server opened a connection, and a TLS handshake, for nearly
		// every request: on 2 cores half the throughput
		// (perf/bench/admission, docs/explanation/performance.md).
		WebhookServer:                 ctrlwebhook.NewServer(ctrlwebhook.Options{Port: cfg.Webhook.Port, CertDir: cfg.Webhook.CertDir, ClientCAName: cfg.Webhook.ClientCAName}),
		Scheme:                        scheme,
		Cache:                         controller.CacheOptions(),
		Metrics:                       metrics,
		HealthProbeBindAddress:        cfg.Health.ProbeBindAddress,
		LeaderElection:                ptr.Deref(le.LeaderElect, true),
		LeaderElectionID:              le.ResourceName,
		LeaderElectionNamespace:       le.ResourceNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &le.LeaseDuration.Duration,
		RenewDeadline:                 &le.RenewDeadline.Duration,
		RetryPeriod:                   &le.RetryPeriod.Duration,
	}
}

// Roles of a manager process: both, or one of the two halves that run as
// separate Deployments, so that a policy problem (a crash, memory, CPU)
// in the admission server can never stop the JobSet controller's
// restarts.
const (
	RoleAll        = "all"
	RoleController = "controller"
	RoleWebhook    = "webhook"
)

// ApplyRole turns off what a role does not run. The webhook half elects
// its own leader (for the audit and the policies' health), under the
// Lease name with "-webhook" appended, so that it never takes the
// controller's.
func ApplyRole(cfg *configv1alpha1.Configuration, role string) error {
	switch role {
	case RoleAll:
	case RoleController:
		cfg.Webhook.Disabled = true
	case RoleWebhook:
		cfg.Controller.Disabled = true
		cfg.LeaderElection.ResourceName += "-webhook"
	default:
		return fmt.Errorf("--role=%s: want %s (the JobSet controller and the admission webhooks), %s or %s", role, RoleAll, RoleController, RoleWebhook)
	}
	if cfg.Controller.Disabled && cfg.Webhook.Disabled {
		return fmt.Errorf("--role=%s with controller.disabled or webhook.disabled in the configuration: the manager would run nothing; leave those out", role)
	}
	return nil
}

// WebhookServiceName is the Service in front of the webhook server.
const WebhookServiceName = "inplace-webhook-service"

// Setup registers the controller, the webhooks and the health checks with
// mgr, and their metrics on reg: cmd/manager passes controller-runtime's
// registry, which the metrics endpoint serves (nil means the same); tests
// pass one registry per manager, so that managers in one process each count
// their own.
func Setup(mgr ctrl.Manager, cfg *configv1alpha1.Configuration, reg prometheus.Registerer, opts ...SetupOption) error {
	var o setupOptions
	for _, opt := range opts {
		opt(&o)
	}
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	if !cfg.Controller.Disabled {
		// Upstream JobSet's controller must not run beside ours, nor our
		// status be written through its CRD: until neither is the case,
		// the controller reconciles nothing and the manager is not ready.
		watchClient, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient()})
		if err != nil {
			return err
		}
		watch := controller.NewUpstreamWatch(watchClient, cfg.Controller.UpstreamJobSet.Namespace)
		if err := mgr.Add(watch); err != nil {
			return err
		}
		gate, err := controller.NewUpstreamGate(mgr.GetAPIReader(), mgr.GetEventRecorder(controller.ControllerName), controller.UpstreamGateOptions{
			Namespace:    cfg.Controller.UpstreamJobSet.Namespace,
			Interval:     cfg.Controller.UpstreamJobSet.CheckInterval.Duration,
			Metrics:      reg,
			Watch:        watch,
			StatusWriter: mgr.GetClient().Status(),
		})
		if err != nil {
			return err
		}
		if err := mgr.Add(gate); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("upstream-jobset", gate.Check); err != nil {
			return err
		}
		store, endpoint, err := setupReports(mgr, cfg, reg, o.reportListener)
		if err != nil {
			return err
		}
		if err := controller.Setup(mgr, controller.Options{
			MaxConcurrentReconciles: cfg.Controller.MaxConcurrentReconciles,
			ChildParallelism:        cfg.Controller.ChildParallelism,
			InPlaceRestartTimeout:   cfg.Controller.InPlaceRestartTimeout.Duration,
			UpdateBatchPeriod:       cfg.Controller.UpdateBatchPeriod.Duration,
			FatalExitSettle:         &cfg.Controller.FatalExitSettle.Duration,
			Metrics:                 reg,
			Gate:                    gate,
			Reports:                 store,
			ReportEndpoint:          endpoint,
		}); err != nil {
			return fmt.Errorf("setting up the jobset controller: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if cfg.Webhook.Disabled {
		return mgr.AddReadyzCheck("readyz", healthz.Ping)
	}

	engine, err := policies.NewEngine(cfg.Policies.DisabledBuiltins)
	if err != nil {
		return err
	}
	engine.SetLimits(policies.Limits{PolicyTimeout: cfg.Policies.EvaluationTimeout.Duration, TotalTimeout: cfg.Policies.RequestTimeout.Duration})
	if err := engine.RegisterMetrics(reg); err != nil {
		return err
	}
	engine.SetExemptNamespaces(cfg.Policies.ExemptNamespaces)
	if err := isolate(mgr, engine, cfg.Policies.Evaluator); err != nil {
		return err
	}
	inventory, err := setupInventory(mgr, cfg, engine, reg)
	if err != nil {
		return err
	}
	policyMetrics, err := reconciler.NewMetrics(reg)
	if err != nil {
		return err
	}
	// Not ready, and admitting nothing, until every JobSetPolicy that
	// exists is loaded.
	tracker := &reconciler.ReadyTracker{Reader: mgr.GetClient()}
	if err := mgr.Add(tracker); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("policies", tracker.Check); err != nil {
		return err
	}
	if err := reconciler.Setup(mgr, engine, policyMetrics, tracker); err != nil {
		return fmt.Errorf("setting up the policy controller: %w", err)
	}
	if d := cfg.Policies.AuditInterval.Duration; d > 0 {
		reportMetrics, err := report.NewMetrics(reg)
		if err != nil {
			return err
		}
		// The reports are read and written past the cache, which holds no
		// unstructured object: no watch on them.
		reports := &report.Writer{Client: mgr.GetClient(), Metrics: reportMetrics}
		if err := mgr.Add(&reconciler.Auditor{Client: mgr.GetClient(), Engine: engine, Interval: d, Metrics: policyMetrics, Reports: reports}); err != nil {
			return err
		}
	}
	if err := webhook.Setup(mgr, webhook.Options{
		Agent:     cfg.Agent,
		Engine:    engine,
		Reader:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("inplace-admission"),
		Metrics:   reg,
		// Nothing is admitted before the policies are loaded and their
		// inventory is listed: a quota policy would otherwise count from
		// zero.
		Ready: func() bool { return tracker.Ready() && inventory.Synced() },
	}); err != nil {
		return fmt.Errorf("setting up the webhooks: %w", err)
	}
	if cfg.Webhook.SelfSignedCerts {
		if err := selfSign(mgr, cfg); err != nil {
			return err
		}
	}
	return mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker())
}

// SetupOption changes how Setup wires the manager, for a process that
// runs it beside what it manages (the local cluster's simulated nodes).
type SetupOption func(*setupOptions)

type setupOptions struct {
	reportListener func(addr string) (net.Listener, error)
}

// ReportListener has the leader's report endpoint listen with listen
// instead of on TCP: a manager beside simulated nodes in one process
// serves their agents over the nodes' in-memory network.
func ReportListener(listen func(addr string) (net.Listener, error)) SetupOption {
	return func(o *setupOptions) { o.reportListener = listen }
}

// setupReports sets the leader's endpoint for the agents' direct reports
// up, unless agent.reports.disabled: their tokens verified against the
// cluster's service-account issuer keys, the reports held in a store the
// controller reads its Pods through. Without an address agents can dial
// (no agent.reports.advertiseAddress and no POD_IP), the agents report on
// their Pods, and the log says so.
func setupReports(mgr ctrl.Manager, cfg *configv1alpha1.Configuration, reg prometheus.Registerer, listen func(string) (net.Listener, error)) (*reports.Store, protocol.ReportEndpoint, error) {
	rc := cfg.Agent.Reports
	store := reports.NewStore()
	log := ctrl.Log.WithName("reports")
	if rc.Disabled {
		log.Info("direct reports are off (agent.reports.disabled): agents report on their Pods")
		return store, protocol.ReportEndpoint{}, nil
	}
	advertise := rc.AdvertiseAddress
	if advertise == "" {
		_, port, err := net.SplitHostPort(rc.BindAddress)
		if err != nil {
			return nil, protocol.ReportEndpoint{}, fmt.Errorf("agent.reports.bindAddress %q: %w", rc.BindAddress, err)
		}
		if ip := os.Getenv("POD_IP"); ip != "" {
			advertise = net.JoinHostPort(ip, port)
		}
	}
	if advertise == "" {
		log.Info("no address for the agents to reach this manager (set POD_IP from status.podIP, or agent.reports.advertiseAddress): agents report on their Pods")
		return store, protocol.ReportEndpoint{}, nil
	}
	verifier, err := token.NewVerifier(context.Background(), mgr.GetConfig(), rc.Audience)
	if err != nil {
		return nil, protocol.ReportEndpoint{}, fmt.Errorf("agent reports: %w; grant the manager get on /.well-known/openid-configuration and /openid/v1/jwks (config/rbac), or set agent.reports.disabled: true", err)
	}
	srv, err := reports.NewServer(reports.Options{
		Verifier: verifier, Audience: rc.Audience, Reader: mgr.GetClient(), Store: store,
		Listen: rc.BindAddress, Listener: listen, Advertise: advertise, Metrics: reg, Log: log,
	})
	if err != nil {
		return nil, protocol.ReportEndpoint{}, err
	}
	// Agents started again with their Pod in place follow their
	// broadcast from the leader: it streams each change its cache sees.
	inf, err := mgr.GetCache().GetInformer(context.Background(), &corev1.ConfigMap{})
	if err != nil {
		return nil, protocol.ReportEndpoint{}, fmt.Errorf("agent reports: the informer of broadcast ConfigMaps: %w", err)
	}
	if _, err := inf.AddEventHandler(srv.BroadcastHandler()); err != nil {
		return nil, protocol.ReportEndpoint{}, fmt.Errorf("agent reports: %w", err)
	}
	// The port is opened when this replica leads (Start): a replica
	// that does not refuses an agent's connection at once.
	if err := mgr.Add(srv); err != nil {
		return nil, protocol.ReportEndpoint{}, err
	}
	return store, srv.Endpoint(), nil
}

// isolate moves the engine's evaluations into child processes, ended
// with the manager.
func isolate(mgr ctrl.Manager, engine *policies.Engine, cfg configv1alpha1.Evaluator) error {
	if cfg.Isolation != configv1alpha1.IsolationProcess {
		return nil
	}
	if err := engine.Isolate(policies.IsolationOptions{
		Processes:   cfg.Processes,
		MemoryLimit: cfg.MemoryLimit.Value(),
		Log:         ctrl.Log.WithName("policy-evaluator"),
	}); err != nil {
		return fmt.Errorf("policies.evaluator.isolation Process: %w", err)
	}
	return mgr.Add(evaluatorCloser{engine})
}

// evaluatorCloseDelay is how long after the manager begins to stop its
// evaluator processes are ended: controller-runtime's graceful shutdown
// timeout, during which the webhooks, stopped last, still serve. A
// manager's process that exits ends them sooner (they die with it); the
// delay matters to a manager stopped inside a longer-lived process.
const evaluatorCloseDelay = 30 * time.Second

// evaluatorCloser ends the evaluator processes once the manager has
// stopped, on every replica, leader or not.
type evaluatorCloser struct{ engine *policies.Engine }

func (evaluatorCloser) NeedLeaderElection() bool { return false }

func (c evaluatorCloser) Start(ctx context.Context) error {
	<-ctx.Done()
	time.AfterFunc(evaluatorCloseDelay, c.engine.Close)
	return nil
}

// setupInventory syncs the configured kinds into the engine's
// data.inventory, on every replica that admits.
func setupInventory(mgr ctrl.Manager, cfg *configv1alpha1.Configuration, engine *policies.Engine, reg prometheus.Registerer) (*inventorysync.Syncer, error) {
	inv := engine.Inventory()
	inv.SetMaxObjects(cfg.Policies.Inventory.MaxObjects)
	s := &inventorysync.Syncer{Cache: mgr.GetCache(), Scheme: mgr.GetScheme(), Inventory: inv}
	for i, k := range cfg.Policies.Inventory.Sync {
		gvk, err := inventorysync.ParseKind(k.Group, k.Version, k.Kind)
		if err != nil {
			return nil, fmt.Errorf("policies.inventory.sync[%d]: %w", i, err)
		}
		s.Kinds = append(s.Kinds, gvk)
	}
	if err := inventorysync.RegisterMetrics(reg, inv); err != nil {
		return nil, err
	}
	if err := mgr.Add(s); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("policy-inventory", func(_ *http.Request) error { return s.Check(nil) }); err != nil {
		return nil, err
	}
	return s, nil
}

// selfSign writes a serving certificate now, before the webhook server
// loads it, and writes its CA into the webhook configurations once the
// manager runs.
func selfSign(mgr ctrl.Manager, cfg *configv1alpha1.Configuration) error {
	hosts := cfg.Webhook.Hosts
	if len(hosts) == 0 {
		ns := Namespace()
		if ns == "" {
			return errors.New("webhook.selfSignedCerts: the serving certificate names the webhook Service in the manager's namespace, which is unknown here (no POD_NAMESPACE, no service account): set POD_NAMESPACE or webhook.hosts")
		}
		hosts = []string{WebhookServiceName, WebhookServiceName + "." + ns, WebhookServiceName + "." + ns + ".svc", "localhost", "127.0.0.1"}
	}
	certs, err := selfsigned.New(cfg.Webhook.CertDir, hosts, 0)
	if err != nil {
		return fmt.Errorf("writing self-signed webhook certificates: %w", err)
	}
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	w := &caWriter{client: c, certs: certs, mutating: cfg.Webhook.MutatingConfigurationName, validating: cfg.Webhook.ValidatingConfigurationName}
	if err := mgr.Add(w); err != nil {
		return err
	}
	// Ready only once the apiserver trusts this replica's certificate: the
	// webhooks fail closed, and a rollout that waits for Ready must not end
	// before they answer.
	return mgr.AddReadyzCheck("webhook-ca", w.written)
}

// caWriter writes a self-signed CA into the webhook configurations, on
// every replica whether it leads or not (the webhooks serve from each),
// then renews the serving certificate it signs until the manager stops.
type caWriter struct {
	client               client.Client
	certs                *selfsigned.Certificates
	mutating, validating string
	done                 atomic.Bool
}

func (w *caWriter) NeedLeaderElection() bool { return false }

func (w *caWriter) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("webhook-ca")
	// Until it succeeds or the manager stops: a Backoff's steps end at its
	// cap, which wait.ExponentialBackoffWithContext takes for giving up.
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 10 * time.Second}
	err := backoff.DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		if err := selfsigned.PatchCABundle(ctx, w.client, w.certs.CA(), w.mutating, w.validating); err != nil {
			log.Error(err, "writing the webhook CA; retrying")
			return false, nil
		}
		log.Info("webhook CA written", "mutating", w.mutating, "validating", w.validating)
		w.done.Store(true)
		return true, nil
	})
	if err != nil || ctx.Err() != nil {
		return err
	}
	return w.certs.Renew(ctx)
}

func (w *caWriter) written(*http.Request) error {
	if !w.done.Load() {
		return errors.New("the webhook CA is not written into the webhook configurations yet")
	}
	return nil
}

// serviceAccountNamespaceFile is where the service account volume of every
// Pod that mounts one holds the Pod's namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Namespace is the namespace the manager runs in: POD_NAMESPACE (the
// downward API) if set, else its service account's; empty outside a
// cluster.
func Namespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	data, err := os.ReadFile(serviceAccountNamespaceFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}
