package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/simnode"
)

func main() {
	kubeconfig := flag.String("write-kubeconfig", ".local/kubeconfig", "where to write the admin kubeconfig")
	nodes := flag.Int("nodes", 16, "simulated nodes to run (0 for none)")
	realNodes := flag.Int("real-nodes", 0, "real nodes to run: a kubelet and a containerd each (needs root and 'make node-deps')")
	withManager := flag.Bool("manager", true, "run inplace-manager (controller and webhooks) in this process")
	checkRealNodes := flag.Bool("check-real-nodes", false, "start nothing: exit 0 if real nodes can run on this machine, else print why and exit 3")
	flag.Parse()
	if *checkRealNodes {
		if err := cluster.RealNodesUnavailable(); err != nil {
			fmt.Println(err)
			os.Exit(3)
		}
		return
	}
	if err := run(*kubeconfig, *nodes, *realNodes, *withManager); err != nil {
		fmt.Fprintln(os.Stderr, "local-cluster:", err)
		os.Exit(1)
	}
}

func run(kubeconfigPath string, nodes, realNodes int, withManager bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	owner, err := ownerFromEnv()
	if err != nil {
		return err
	}
	if owner != 0 {
		// The owner's exit stops the cluster as a signal does.
		gone, err := watchProcess(owner)
		if err != nil {
			return err
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-gone:
				fmt.Printf("local-cluster: its owner, process %d (%s), exited\n", owner, ownerEnv)
				cancel()
			case <-ctx.Done():
			}
		}()
	}

	c, err := cluster.Start(ctx, cluster.Options{Name: "local-cluster", RealNodes: realNodes})
	if err != nil {
		return err
	}
	failed := true
	defer func() {
		err := c.Stop(failed)
		if left := c.LeftOnHost(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "local-cluster: the real nodes left on the host:\n  %s\n", strings.Join(left, "\n  "))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "local-cluster: stopping:", err)
		}
		if failed {
			fmt.Fprintln(os.Stderr, "local-cluster: component logs kept in", c.LogsDir())
		}
		os.Remove(kubeconfigPath)
		os.Remove(socketsPath(kubeconfigPath))
	}()

	// The CRDs config/default installs: without the PolicyReport CRDs the
	// policy audit would write no reports.
	if err := deploy.InstallCRDs(c.Config); err != nil {
		return fmt.Errorf("installing CRDs: %w", err)
	}
	if err := waitForOpenAPI(ctx, c.Config, "apis/jobset.x-k8s.io/v1alpha2"); err != nil {
		return err
	}
	log := zap.New(zap.UseDevMode(false))
	ctrl.SetLogger(log)
	var managerDone <-chan error
	if withManager {
		configure := func(conf *configv1alpha1.Configuration) {
			// The agent image every real node imported (a tag other than
			// latest: pulled only if not present).
			conf.Agent.Image = images.Agent
			if realNodes > 0 {
				// Their containerd mounts image volumes: the workers
				// run the supervisor from the agent's image, with no
				// copy.
				conf.Agent.SupervisorVolume = configv1alpha1.SupervisorVolumeImage
			}
		}
		if managerDone, err = deploy.RunManager(ctx, c.Config, configure, nil); err != nil {
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
	// Where `make image-pytorch` imports images into the real nodes.
	if sockets := c.ContainerdSockets(); len(sockets) > 0 {
		if err := os.WriteFile(socketsPath(kubeconfigPath), []byte(strings.Join(sockets, "\n")+"\n"), 0o600); err != nil {
			return err
		}
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

// socketsPath lists the real nodes' containerd addresses, one a line,
// beside the kubeconfig.
func socketsPath(kubeconfig string) string {
	return filepath.Join(filepath.Dir(kubeconfig), "containerd-sockets")
}
