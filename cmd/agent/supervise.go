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
// agent container's postStart hook in process scope.
func installSupervisor(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: inplace-agent", protocol.InstallCommand, "DEST")
		return 2
	}
	if err := supervisor.Install(args[0]); err != nil {
		msg := fmt.Sprintf("inplace-agent: postStart hook: %v", err)
		fmt.Fprintln(os.Stderr, msg)
		// The kubelet keeps a hook's output in its own log only, and kills
		// the container: its termination message is where a user sees why.
		_ = os.WriteFile(terminationLog, []byte(msg), 0o644)
		return 1
	}
	return 0
}

// terminationLog is the container's default terminationMessagePath.
const terminationLog = "/dev/termination-log"
