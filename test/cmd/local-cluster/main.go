// Command local-cluster runs the local cluster of package test/cluster in the
// foreground until it receives SIGINT or SIGTERM: `make cluster-up` starts it
// in the background and `make cluster-down` stops it. It installs the CRDs of
// config/crd and writes an admin kubeconfig to -kubeconfig once the cluster
// is ready.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/manager"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/simnode"
)

func main() {
	kubeconfig := flag.String("write-kubeconfig", ".local/kubeconfig", "where to write the admin kubeconfig")
	crds := flag.String("crds", "config/crd/bases", "directory of CRDs to install")
	nodes := flag.Int("nodes", 16, "simulated nodes to run (0 for none)")
	withManager := flag.Bool("manager", true, "run inplace-manager (controller and webhooks) in this process")
	flag.Parse()
	if err := run(*kubeconfig, *crds, *nodes, *withManager); err != nil {
		fmt.Fprintln(os.Stderr, "local-cluster:", err)
		os.Exit(1)
	}
}

func run(kubeconfigPath, crdDir string, nodes int, withManager bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	c, err := cluster.Start(ctx, cluster.Options{Name: "local-cluster"})
	if err != nil {
		return err
	}
	failed := true
	defer func() {
		if err := c.Stop(failed); err != nil {
			fmt.Fprintln(os.Stderr, "local-cluster: stopping:", err)
		}
		if failed {
			fmt.Fprintln(os.Stderr, "local-cluster: component logs kept in", c.LogsDir())
		}
		os.Remove(kubeconfigPath)
	}()

	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{Paths: []string{crdDir}, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing CRDs: %w", err)
	}
	if err := waitForOpenAPI(ctx, c.Config, "apis/jobset.x-k8s.io/v1alpha2"); err != nil {
		return err
	}
	log := zap.New(zap.UseDevMode(false))
	ctrl.SetLogger(log)
	managerDone := make(chan error, 1)
	if withManager {
		if err := startManager(ctx, c.Config, managerDone); err != nil {
			return err
		}
	}
	if nodes > 0 {
		if _, err := simnode.Start(ctx, simnode.Options{
			Client: kubernetes.NewForConfigOrDie(c.Config), Nodes: nodes, Prefix: "sim",
			AgentContainer: "inplace-agent", AgentConfig: c.Config, Log: log.WithName("simnode"),
		}); err != nil {
			return err
		}
	}
	data, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(kubeconfigPath), 0o755); err != nil {
		return err
	}
	// Written last and atomically: its presence tells the caller the cluster is ready.
	tmp := kubeconfigPath + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, kubeconfigPath); err != nil {
		return err
	}
	fmt.Printf("local-cluster: ready at %s; logs in %s; kubeconfig %s\n", c.Host, c.LogsDir(), kubeconfigPath)

	select {
	case <-ctx.Done():
		failed = false
		fmt.Println("local-cluster: stopping")
		return nil
	case <-c.Done():
		return fmt.Errorf("a component exited: %w", c.CheckAlive())
	case err := <-managerDone:
		return fmt.Errorf("inplace-manager stopped: %w", err)
	}
}

// startManager runs inplace-manager in this process with self-signed
// webhook certificates, and registers the webhooks of config/webhook.
func startManager(ctx context.Context, cfg *rest.Config, done chan<- error) error {
	conf, err := configv1alpha1.Load("")
	if err != nil {
		return err
	}
	certDir, err := os.MkdirTemp("", "inplace-local-webhook-")
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); os.RemoveAll(certDir) }()
	port, err := freePort()
	if err != nil {
		return err
	}
	conf.LeaderElection.LeaderElect = ptr.To(false)
	conf.Metrics.BindAddress, conf.Health.ProbeBindAddress = "0", "0"
	conf.Webhook.Port, conf.Webhook.CertDir = port, certDir
	conf.Webhook.SelfSignedCerts, conf.Webhook.Hosts = true, []string{"127.0.0.1", "localhost"}
	// The manager runs as its service account with the RBAC of config/rbac,
	// and the agents under the admission policy of config/agent, as on a
	// real cluster.
	mgrCfg, err := deploy.ManagerConfig(ctx, cfg, 7*24*time.Hour)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(mgrCfg, manager.Options(conf, manager.NewScheme()))
	if err != nil {
		return err
	}
	if err := manager.Setup(mgr, conf); err != nil {
		return err
	}
	go func() { done <- mgr.Start(ctx) }()
	c, err := client.New(cfg, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		return err
	}
	if err := deploy.Apply(ctx, c, "config/agent/validating-admission-policy.yaml"); err != nil {
		return err
	}
	return framework.RegisterWebhooks(ctx, c, port)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitForOpenAPI waits until the apiserver publishes the OpenAPI v3 schema of
// a group version, so that `kubectl explain` works as soon as the cluster is
// reported ready.
func waitForOpenAPI(ctx context.Context, cfg *rest.Config, path string) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/openapi/v3").DoRaw(ctx)
		return err == nil && strings.Contains(string(body), `"`+path+`"`), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the OpenAPI schema of %s: %w", path, err)
	}
	return nil
}
