package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/inplace-dev/inplace/agent/supervisor"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/cmd/internal/version"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case protocol.SupervisorCommand:
		os.Exit(supervise(os.Args[2:]))
	case protocol.InstallCommand:
		os.Exit(install(os.Args[2:]))
	case "version", "--version":
		fmt.Println("inplace-supervisor", version.Get())
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: inplace-supervisor %s [flags] -- COMMAND [ARG...]\n       inplace-supervisor %s DEST\n       inplace-supervisor version\n",
		protocol.SupervisorCommand, protocol.InstallCommand)
	os.Exit(2)
}

// supervise runs the worker, and returns the container's exit code.
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

// install copies this binary to DEST: the agent container's postStart
// hook.
func install(args []string) int {
	if len(args) != 1 {
		usage()
	}
	if err := supervisor.Install(args[0]); err != nil {
		msg := fmt.Sprintf("inplace-supervisor: postStart hook: %v", err)
		fmt.Fprintln(os.Stderr, msg)
		// The kubelet keeps a hook's output in its own log only, and kills
		// the container: its termination message is where a user sees why.
		if f, err := os.OpenFile(terminationLog, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
			_, _ = f.WriteString(msg)
			_ = f.Close()
		}
		return 1
	}
	return 0
}

// terminationLog is the container's default terminationMessagePath.
const terminationLog = "/dev/termination-log"
