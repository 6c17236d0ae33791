package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/inplace-dev/inplace/agent/supervisor"
	"github.com/inplace-dev/inplace/api/protocol"
)

// supervise runs `inplace-agent supervise [flags] -- COMMAND [ARG...]`, the
// command the webhook gives a worker container in process scope, and
// returns the container's exit code.
func supervise(args []string) int {
	fs := flag.NewFlagSet(protocol.SupervisorCommand, flag.ContinueOnError)
	var cfg supervisor.Config
	restart := fs.String("restart-exit-codes", "NotIn:0", "the worker's exit codes that restart in place, as In:<codes> or NotIn:<codes>; any other ends the container with it")
	fs.StringVar(&cfg.Agent, "agent", "127.0.0.1:8081", "the agent's barrier address in the Pod")
	fs.StringVar(&cfg.Container, "container", "", "the name of this worker container")
	fs.DurationVar(&cfg.GracePeriod, "grace-period", 30*time.Second, "how long a worker being stopped has between SIGTERM and SIGKILL")
	readiness := fs.String("readiness", "", "the worker container's readiness probe, in JSON, to run against each worker started and report to the agent (in JobSets whose barriers lift in order)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: inplace-agent supervise [flags] -- COMMAND [ARG...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var err error
	if cfg.Restart, err = supervisor.ParseExitCodes(*restart); err != nil {
		fmt.Fprintln(os.Stderr, "inplace-supervisor: --restart-exit-codes:", err)
		return 2
	}
	if *readiness != "" {
		cfg.Readiness = &protocol.ReadinessProbe{}
		if err := json.Unmarshal([]byte(*readiness), cfg.Readiness); err != nil {
			fmt.Fprintln(os.Stderr, "inplace-supervisor: --readiness:", err)
			return 2
		}
	}
	if cfg.Container == "" {
		fmt.Fprintln(os.Stderr, "inplace-supervisor: --container is required")
		return 2
	}
	cfg.Command, cfg.Log = fs.Args(), os.Stderr
	return supervisor.Run(context.Background(), cfg)
}

// installSupervisor runs `inplace-agent install-supervisor DEST`, the
// webhook's init container in process scope.
func installSupervisor(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: inplace-agent", protocol.InstallCommand, "DEST")
		return 2
	}
	if err := supervisor.Install(args[0]); err != nil {
		fmt.Fprintln(os.Stderr, "inplace-agent:", err)
		return 1
	}
	return 0
}
