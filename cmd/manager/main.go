package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/cmd/internal/version"
	"github.com/inplace-dev/inplace/cmd/manager/app"
)

func main() {
	var (
		configFile  string
		leaderElect bool
		metricsAddr string
		probeAddr   string
		selfSigned  bool
		role        string
	)
	flag.StringVar(&configFile, "config", "", "path of the configuration file (config.inplace.dev/v1alpha1 Configuration); defaults apply without it")
	flag.BoolVar(&leaderElect, "leader-elect", true, "elect a leader among replicas (overrides the configuration file when set)")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "", "address of the metrics endpoint, \"0\" to disable (overrides the configuration file)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "", "address of /healthz and /readyz (overrides the configuration file)")
	flag.StringVar(&role, "role", app.RoleAll, "what this process runs: all, controller (the JobSet controller) or webhook (the admission webhooks and the policy engine)")
	flag.BoolVar(&selfSigned, "webhook-self-signed", false, "create a self-signed webhook serving certificate and write its CA into the webhook configurations (for clusters without cert-manager)")
	var showVersion bool
	flag.BoolVar(&showVersion, "version", false, "print the version and exit")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if showVersion {
		fmt.Println("inplace-manager", version.Get())
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	cfg, err := configv1alpha1.Load(configFile)
	if err != nil {
		log.Error(err, "loading configuration")
		os.Exit(1)
	}
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "leader-elect":
			cfg.LeaderElection.LeaderElect = ptr.To(leaderElect)
		case "metrics-bind-address":
			cfg.Metrics.BindAddress = metricsAddr
		case "health-probe-bind-address":
			cfg.Health.ProbeBindAddress = probeAddr
		case "webhook-self-signed":
			cfg.Webhook.SelfSignedCerts = selfSigned
		}
	})
	if err := app.ApplyRole(cfg, role); err != nil {
		log.Error(err, "choosing the role")
		os.Exit(1)
	}
	if cfg.LeaderElection.ResourceNamespace == "" {
		cfg.LeaderElection.ResourceNamespace = app.Namespace()
	}

	if err := run(cfg); err != nil {
		log.Error(err, "inplace-manager stopped")
		os.Exit(1)
	}
}

func run(cfg *configv1alpha1.Configuration) error {
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	restConfig.QPS = *cfg.ClientConnection.QPS
	restConfig.Burst = int(*cfg.ClientConnection.Burst)
	mgr, err := ctrl.NewManager(restConfig, app.Options(cfg, app.NewScheme()))
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	// The process's build, once, on the registry the endpoint serves.
	if err := app.RegisterBuildInfo(metrics.Registry); err != nil {
		return fmt.Errorf("registering the build info metric: %w", err)
	}
	if err := app.Setup(mgr, cfg, metrics.Registry); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting inplace-manager")
	return mgr.Start(ctrl.SetupSignalHandler())
}
