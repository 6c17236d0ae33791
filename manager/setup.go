// Package manager assembles inplace-manager: the manager options that follow
// from the configuration file, and the registration of every controller.
// cmd/manager and the tests build the manager through the same two calls:
//
//	mgr, err := ctrl.NewManager(restConfig, manager.Options(cfg, scheme))
//	err = manager.Setup(mgr, cfg)
package manager

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobsetv1alpha2 "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller"
)

// NewScheme returns a scheme with the built-in types and the JobSet API.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(s))
	return s
}

// Options returns the controller-runtime manager options for a
// configuration.
func Options(cfg *configv1alpha1.Configuration, scheme *runtime.Scheme) ctrl.Options {
	metrics := metricsserver.Options{
		BindAddress:   cfg.Metrics.BindAddress,
		SecureServing: ptr.Deref(cfg.Metrics.Secure, true),
	}
	if metrics.SecureServing {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	le := cfg.LeaderElection
	return ctrl.Options{
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

// Setup registers every controller and the health checks with mgr.
func Setup(mgr ctrl.Manager, cfg *configv1alpha1.Configuration) error {
	if err := controller.Setup(mgr, controller.Options{
		MaxConcurrentReconciles: cfg.Controller.MaxConcurrentReconciles,
		ChildParallelism:        cfg.Controller.ChildParallelism,
	}); err != nil {
		return fmt.Errorf("setting up the jobset controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("readyz", healthz.Ping)
}

// Namespace is the namespace the manager runs in, from the downward API's
// POD_NAMESPACE; empty outside a cluster.
func Namespace() string { return os.Getenv("POD_NAMESPACE") }
