package supervisor

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/inplace-dev/inplace/api/protocol"
)

// ParseArgs reads the arguments of `inplace-supervisor supervise`, as the
// webhook writes them: flags, "--", then the worker's command. Usage and
// errors go to output.
func ParseArgs(args []string, output io.Writer) (Config, error) {
	fs := flag.NewFlagSet(protocol.SupervisorCommand, flag.ContinueOnError)
	fs.SetOutput(output)
	var cfg Config
	restart := fs.String("restart-exit-codes", "NotIn:0", "the worker's exit codes that restart in place, as In:<codes> or NotIn:<codes>; any other ends the container with it")
	readiness := fs.String("readiness", "", "the worker container's readiness probe, in JSON, to run against each worker started and report to the agent (in JobSets whose barriers lift in order)")
	fs.StringVar(&cfg.Agent, "agent", "127.0.0.1:18080", "the agent's barrier address in the Pod")
	fs.StringVar(&cfg.Container, "container", "", "the name of this worker container")
	fs.DurationVar(&cfg.GracePeriod, "grace-period", 30*time.Second, "how long a worker being stopped has between SIGTERM and SIGKILL")
	fs.BoolVar(&cfg.Standby, "standby", false, "in-process scope: keep a standby process of the worker's command, started ahead, to take the place of a worker that fails")
	fs.DurationVar(&cfg.ParkDeadline, "park-deadline", 0, "in-process scope: how long the worker has to park (api/protocol/inprocess.go) when its epoch is over, before it is stopped; 0: process scope, the worker is stopped at once")
	fs.Usage = func() {
		fmt.Fprintln(output, "usage: inplace-supervisor supervise [flags] -- COMMAND [ARG...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	var err error
	if cfg.Restart, err = ParseExitCodes(*restart); err != nil {
		return cfg, fmt.Errorf("--restart-exit-codes: %w", err)
	}
	if *readiness != "" {
		cfg.Readiness = &protocol.ReadinessProbe{}
		if err := json.Unmarshal([]byte(*readiness), cfg.Readiness); err != nil {
			return cfg, fmt.Errorf("--readiness: %w", err)
		}
	}
	if cfg.ParkDeadline < 0 {
		return cfg, errors.New("--park-deadline must not be negative")
	}
	if cfg.Standby && cfg.ParkDeadline == 0 {
		return cfg, errors.New("--standby needs --park-deadline: a standby waits on the worker protocol of in-process scope")
	}
	if cfg.Container == "" {
		return cfg, errors.New("--container is required")
	}
	if cfg.Command = fs.Args(); len(cfg.Command) == 0 {
		return cfg, errors.New("no command to run after --")
	}
	return cfg, nil
}
