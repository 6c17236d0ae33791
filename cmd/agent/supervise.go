package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/inplace-dev/inplace/agent/supervisor"
	"github.com/inplace-dev/inplace/api/protocol"
)

// supervise runs `inplace-agent supervise [flags] -- COMMAND [ARG...]`, the
// command the webhook gives a worker container in process scope, and
// returns the container's exit code.
func supervise(args []string) int {
	cfg, err := supervisor.ParseArgs(args, os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "inplace-supervisor:", err)
		}
		return 2
	}
	cfg.Log = os.Stderr
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
