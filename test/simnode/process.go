package simnode

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/inplace-dev/inplace/agent/supervisor"
)

// Process scope on a simulated node: a worker container whose command the
// webhook wrapped runs the real supervisor's logic (agent/supervisor),
// speaking to the Pod's agent over the Pod network, with the worker's
// processes modelled by simProcesses: a start takes Latency.ProcessStart,
// a stop on SIGTERM Latency.ProcessStop.

// supervisorConfig reads the supervisor's arguments from the container's
// command, as the binary does, for a worker modelled by procs.
func (r *podRunner) supervisorConfig(c corev1.Container, procs *simProcesses) supervisor.Config {
	cfg, err := supervisor.ParseArgs(c.Command[2:], io.Discard)
	if err != nil {
		r.sim.opts.Log.Error(err, "the supervisor's arguments", "pod", r.namespace+"/"+r.name, "container", c.Name)
	}
	// The agent listens on the Pod's address in the Pod network.
	_, port, _ := strings.Cut(cfg.Agent, ":")
	cfg.Agent = r.ip + ":" + port
	// The Pod network's client, bounded as the binary's own.
	client := &http.Client{Transport: r.sim.prober.Transport, Timeout: supervisor.RequestTimeout}
	cfg.Processes, cfg.Client, cfg.Signals = procs, client, make(chan os.Signal)
	cfg.Log = io.Discard
	if log := r.sim.opts.Log.V(1); log.Enabled() {
		cfg.Log = logWriter{log.WithValues("pod", r.namespace+"/"+r.name, "container", c.Name)}
	}
	return cfg
}

// logWriter gives each line a supervisor writes to a logger, at the
// simulation's verbose level: what a worker container's log would show.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info("supervisor", "line", strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// runSupervisor runs container c's supervisor until it ends the container,
// and returns its exit code.
func (r *podRunner) runSupervisor(ctx context.Context, c corev1.Container, procs *simProcesses) int {
	return supervisor.Run(ctx, r.supervisorConfig(c, procs))
}

// simProcesses models one container's worker processes.
type simProcesses struct {
	r     *podRunner
	exits chan supervisor.ChildExit

	mu      sync.Mutex
	next    int
	running int // the id of the worker running, 0 for none
	stopped bool
}

func newSimProcesses(r *podRunner) *simProcesses {
	return &simProcesses{r: r, exits: make(chan supervisor.ChildExit, 4)}
}

func (p *simProcesses) Start(int32) (int, error) {
	p.mu.Lock()
	p.next++
	id := p.next
	p.running, p.stopped = id, false
	p.mu.Unlock()
	go func() {
		spend(context.Background(), p.r.sim.latency().ProcessStart)
		p.r.record(WorkersStarted, 0)
	}()
	return id, nil
}

func (p *simProcesses) Signal(id int, sig syscall.Signal) {
	p.mu.Lock()
	if p.running != id || (p.stopped && sig != syscall.SIGKILL) {
		p.mu.Unlock()
		return
	}
	switch sig {
	case syscall.SIGKILL:
		// Also after a SIGTERM the worker has not answered yet: the grace
		// period is over.
		p.running = 0
		p.mu.Unlock()
		p.r.record(WorkersStopped, 0)
		p.exits <- supervisor.ChildExit{ID: id, Code: 137}
	case syscall.SIGTERM, syscall.SIGINT:
		p.stopped = true
		p.mu.Unlock()
		p.r.record(WorkerStopping, 0)
		go func() {
			// The worker's own handling of the signal.
			spend(context.Background(), p.r.sim.latency().ProcessStop)
			p.mu.Lock()
			live := p.running == id
			p.running = 0
			p.mu.Unlock()
			if live {
				p.r.record(WorkersStopped, 0)
				p.exits <- supervisor.ChildExit{ID: id, Code: 143}
			}
		}()
	default:
		p.mu.Unlock()
	}
}

func (p *simProcesses) Exits() <-chan supervisor.ChildExit { return p.exits }

// exit makes the running worker exit with code, as the failure annotation
// asks; it reports whether one ran.
func (p *simProcesses) exit(code int) bool {
	p.mu.Lock()
	id := p.running
	p.running = 0
	p.mu.Unlock()
	if id == 0 {
		return false
	}
	p.r.record(WorkerExited, int32(code))
	p.exits <- supervisor.ChildExit{ID: id, Code: code}
	return true
}
