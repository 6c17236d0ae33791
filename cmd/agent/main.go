package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/inplace-dev/inplace/agent"
	"github.com/inplace-dev/inplace/api/protocol"
)

func main() {
	log := zap.New()
	env := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			fmt.Fprintf(os.Stderr, "inplace-agent: environment variable %s is not set; the mutating webhook sets it\n", name)
			os.Exit(1)
		}
		return v
	}
	code, convErr := strconv.Atoi(env(protocol.EnvRestartExitCode))
	if convErr != nil {
		fmt.Fprintf(os.Stderr, "inplace-agent: %s: %v\n", protocol.EnvRestartExitCode, convErr)
		os.Exit(1)
	}
	cfg := agent.Config{
		ReplicatedJob:   env(protocol.EnvReplicatedJobName),
		RestartExitCode: code,
		Listen:          ":" + env(protocol.EnvBarrierPort),
	}
	// Optional: agents injected by older managers do not hold probes.
	if v := os.Getenv(protocol.EnvBarrierHold); v != "" {
		millis, err := strconv.Atoi(v)
		if err != nil || millis < 0 {
			fmt.Fprintf(os.Stderr, "inplace-agent: %s=%q: want a number of milliseconds\n", protocol.EnvBarrierHold, v)
			os.Exit(1)
		}
		cfg.BarrierHold = time.Duration(millis) * time.Millisecond
	}
	// In a Pod the agent authenticates with its service account token;
	// KUBECONFIG points it elsewhere, to run it outside a cluster.
	var restCfg *rest.Config
	var err error
	if path := os.Getenv("KUBECONFIG"); path != "" {
		restCfg, err = clientcmd.BuildConfigFromFlags("", path)
	} else {
		restCfg, err = rest.InClusterConfig()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "inplace-agent:", err)
		os.Exit(1)
	}
	t := &agent.KubeTransport{
		Client:    kubernetes.NewForConfigOrDie(agent.ClientConfig(restCfg)),
		Namespace: env(protocol.EnvNamespace),
		Pod:       env(protocol.EnvPodName),
		JobSet:    env(protocol.EnvJobSetName),
		Log:       log,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	exit, err := agent.Run(ctx, log, cfg, t)
	if err != nil {
		log.Error(err, "agent failed")
	}
	os.Exit(agent.FinalExitCode(ctx, exit, cfg.RestartExitCode))
}
