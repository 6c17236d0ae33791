package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/inplace-dev/inplace/agent"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/cmd/internal/version"
)

// serviceAccountNamespace is where upstream JobSet's agent reads its
// namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println("inplace-agent", version.Get())
		return
	}
	if len(os.Args) == 3 && os.Args[1] == legacyInstallCommand {
		installLegacy(os.Args[2])
	}
	if len(os.Args) > 1 {
		fail(fmt.Errorf("takes no arguments, only its environment (got %q); the supervisor of process scope is inplace-supervisor, in the same image", os.Args[1:]))
	}
	log := zap.New()
	log.Info("inplace-agent starting", "version", version.Get().String())
	restCfg, err := clientConfig()
	if err != nil {
		fail(err)
	}
	var (
		cfg agent.Config
		t   agent.Transport
	)
	if upstreamEnvironment() {
		cfg, t, err = upstream(log, restCfg)
	} else {
		cfg, t, err = injected(log, restCfg)
	}
	if err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	exit, err := agent.Run(ctx, log, cfg, t)
	if err != nil {
		log.Error(err, "agent failed")
	}
	os.Exit(agent.FinalExitCode(ctx, exit, cfg.RestartExitCode))
}

// upstreamEnvironment reports whether the agent was given upstream JobSet's
// agent's environment: its JobSet and Pod, and none of the variables the
// mutating webhook sets.
func upstreamEnvironment() bool {
	for _, ours := range []string{protocol.EnvRestartExitCode, protocol.EnvBarrierPort, protocol.EnvReplicatedJobName} {
		if os.Getenv(ours) != "" {
			return false
		}
	}
	return os.Getenv(protocol.EnvJobSetName) != "" && os.Getenv(protocol.EnvPodName) != ""
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "inplace-agent:", err)
	os.Exit(1)
}

// clientConfig is the agent's service account in a Pod; KUBECONFIG points
// it elsewhere, to run it outside a cluster.
func clientConfig() (*rest.Config, error) {
	if path := os.Getenv("KUBECONFIG"); path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	return rest.InClusterConfig()
}

// injected configures the agent as the mutating webhook injects it.
func injected(log logr.Logger, restCfg *rest.Config) (agent.Config, agent.Transport, error) {
	cfg, err := agent.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		return cfg, nil, err
	}
	var missing []string
	env := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			missing = append(missing, name)
		}
		return v
	}
	t := &agent.KubeTransport{
		Client:    kubernetes.NewForConfigOrDie(agent.ClientConfig(restCfg)),
		Namespace: env(protocol.EnvNamespace),
		Pod:       env(protocol.EnvPodName),
		JobSet:    env(protocol.EnvJobSetName),
		Log:       log,
	}
	if len(missing) > 0 {
		return cfg, nil, fmt.Errorf("environment variables %s are not set; the mutating webhook sets them", strings.Join(missing, ", "))
	}
	// In process and in-process scope the agent's postStart hook installs
	// the supervisor on the emptyDir mounted here; the agent reports no
	// epoch before it has. Nothing is mounted here, and nothing waited
	// for, where the workers mount the supervisor from the agent's image
	// (the kubelet mounts an image volume before any container starts) or
	// where an earlier injection installed it from an init container.
	if fi, err := os.Stat(protocol.SupervisorDir); cfg.Process != nil && err == nil && fi.IsDir() {
		cfg.Process.SupervisorBinary = protocol.SupervisorBinary
	}
	// With a projected token for the controller's audience, the agent
	// reports to the controller where the broadcast names an endpoint (an
	// agent injected by an older manager has none, and writes its Pod).
	if path := os.Getenv(protocol.EnvReportTokenPath); path != "" {
		d := &agent.DirectTransport{KubeTransport: t, Token: agent.TokenFile(path),
			NoPodFallback: os.Getenv(protocol.EnvReportPodFallback) == "false"}
		// On the Pod's state volume, the endpoint outlives the agent's
		// container: started again in a Pod restarted in place, the
		// agent reads its broadcast from the leader, not from a watch.
		if dir := os.Getenv(protocol.EnvAgentStateDir); dir != "" {
			d.Memory = agent.EndpointFile(filepath.Join(dir, agent.StateFile))
		}
		return cfg, d, nil
	}
	return cfg, t, nil
}

// upstream configures the agent from upstream JobSet's agent's
// environment, with upstream's defaults, in sidecar mode.
func upstream(log logr.Logger, restCfg *rest.Config) (agent.Config, agent.Transport, error) {
	if os.Getenv(protocol.UpstreamEnvWorkerCommand) != "" {
		return agent.Config{}, nil, fmt.Errorf("%s is set: inplace-agent runs only as a sidecar, not as the main container that runs the worker; use upstream JobSet's agent for that mode", protocol.UpstreamEnvWorkerCommand)
	}
	pod := os.Getenv(protocol.EnvPodName)
	if pod == "" {
		return agent.Config{}, nil, fmt.Errorf("%s is not set: set it from metadata.name with the downward API", protocol.EnvPodName)
	}
	namespace := []byte(os.Getenv(protocol.EnvNamespace))
	var err error
	if len(namespace) == 0 {
		if namespace, err = os.ReadFile(serviceAccountNamespace); err != nil {
			return agent.Config{}, nil, fmt.Errorf("reading the namespace: %w (mount the service account token, or set %s)", err, protocol.EnvNamespace)
		}
	}
	cfg := agent.Config{RestartExitCode: 1, Listen: ":8081", BarrierPath: "/barrier-is-down"}
	if v := os.Getenv(protocol.UpstreamEnvExitCode); v != "" {
		if cfg.RestartExitCode, err = strconv.Atoi(v); err != nil {
			return cfg, nil, fmt.Errorf("%s=%q: %w", protocol.UpstreamEnvExitCode, v, err)
		}
	}
	if v := os.Getenv(protocol.UpstreamEnvProbePath); v != "" {
		cfg.BarrierPath = v
	}
	if v := os.Getenv(protocol.UpstreamEnvProbePort); v != "" {
		cfg.Listen = ":" + v
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return cfg, nil, err
	}
	t := &agent.UpstreamTransport{
		Client:    kubernetes.NewForConfigOrDie(agent.ClientConfig(restCfg)),
		Dynamic:   dyn,
		Namespace: strings.TrimSpace(string(namespace)),
		Pod:       pod,
		JobSet:    os.Getenv(protocol.EnvJobSetName),
		Log:       log,
	}
	log.Info("speaking upstream JobSet's in-place restart protocol", "jobset", t.JobSet, "barrier", cfg.Listen+cfg.BarrierPath)
	return cfg, t, nil
}

// legacyInstallCommand is how Pods injected by earlier versions install
// the supervisor: an init container running this image with
// `install-supervisor /inplace-supervisor/inplace-agent`, and workers
// running that copy with `supervise`. The supervisor's own binary does
// both, so it is installed under the old name.
const legacyInstallCommand = "install-supervisor"

func installLegacy(dest string) {
	err := syscall.Exec(protocol.ImageSupervisorBinary, []string{protocol.ImageSupervisorBinary, protocol.InstallCommand, dest}, os.Environ())
	fail(fmt.Errorf("running %s: %w", protocol.ImageSupervisorBinary, err))
}
