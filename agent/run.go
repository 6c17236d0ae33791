package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/inplace-dev/inplace/api/protocol"
)

// Transport is how the agent talks to the rest of the protocol.
type Transport interface {
	// Broadcasts delivers the JobSet's broadcast, current first, then every
	// change, until ctx ends; it re-establishes its watch by itself.
	Broadcasts(ctx context.Context) (<-chan protocol.Broadcast, error)
	// ReportEpoch writes the agent's epoch on its Pod. An error wrapping
	// ErrReportRefused says the write was refused as it stands (by
	// authorization or admission), not that it failed on the way.
	ReportEpoch(ctx context.Context, epoch int32) error
	// Self returns the epoch the Pod carries (0 if none) and whether its
	// worker containers are running. The agent asks only when what it was
	// started with does not settle its start (NeedsPod), or when its report
	// was refused.
	Self(ctx context.Context) (epoch int32, workers Workers, err error)
}

// Config is the agent's configuration, from its environment.
type Config struct {
	ReplicatedJob   string
	RestartExitCode int
	// Listen is the address of the barrier and /healthz.
	Listen string
	// BarrierPath is the barrier's path, answered once it has lifted;
	// empty means protocol.BarrierPath. Upstream JobSet's manifests probe
	// /barrier-is-down.
	BarrierPath string
	// Listener, if set, is used instead of listening on Listen: a host
	// that runs agents in its own process (the simulated nodes) gives each
	// its own network.
	Listener net.Listener
	// BarrierHold is how long a request to /barrier-is-lifted waits for the
	// barrier to lift before it answers that it has not. The kubelet's
	// startup probe then sees the lift at once, not a probe period later;
	// it must stay below the probe's timeoutSeconds. 0 answers at once.
	BarrierHold time.Duration
	// PodEpoch is the epoch the Pod carried when the kubelet started this
	// container (protocol.EnvPodEpoch, from the Downward API; 0 for none),
	// or nil when the environment does not say: an agent injected by an
	// older manager, or one configured as upstream JobSet's. With it, an
	// agent restarted in place with its Pod needs no read of the Pod.
	PodEpoch *int32
	// Process is set in process scope (protocol.EnvRestartScope): the
	// agent restarts its Pod's workers through their supervisors instead
	// of exiting with the restart code.
	Process *ProcessConfig
}

// ProcessConfig is the agent's configuration in process scope.
type ProcessConfig struct {
	// Supervised names the worker containers run by a supervisor.
	Supervised []string
	// AnyPeer serves the supervisors from any address, not only the
	// Pod's loopback: the simulated nodes' Pod network has none.
	AnyPeer bool
	// WorkerRestarts is the count of the Pod's worker restarts so far
	// (protocol.WorkerRestartsAnnotation, from the Downward API).
	WorkerRestarts int32
	// SupervisorBinary, if set, is the supervisor's binary as the agent's
	// postStart hook installs it: the agent reports no epoch before it
	// exists. A hook that failed leaves the workers' containers unable to
	// start; an epoch reported meanwhile would let the JobSet sync, and
	// nothing would say why its workers never run.
	SupervisorBinary string
}

// ConfigFromEnv is the agent's configuration from the environment the
// mutating webhook injects (lookup is os.LookupEnv, or a simulated
// kubelet's): the replicated job, the barrier's port (Listen is
// ":<port>"), the restart exit code, and, optional for agents injected by
// older managers, the probes' hold and the Pod's epoch.
func ConfigFromEnv(lookup func(string) (string, bool)) (Config, error) {
	var missing []string
	env := func(name string) string {
		v, _ := lookup(name)
		if v == "" {
			missing = append(missing, name)
		}
		return v
	}
	cfg := Config{ReplicatedJob: env(protocol.EnvReplicatedJobName), Listen: ":" + env(protocol.EnvBarrierPort)}
	code := env(protocol.EnvRestartExitCode)
	if len(missing) > 0 {
		return cfg, fmt.Errorf("environment variables %s are not set; the mutating webhook sets them", strings.Join(missing, ", "))
	}
	var err error
	if cfg.RestartExitCode, err = strconv.Atoi(code); err != nil {
		return cfg, fmt.Errorf("%s: %w", protocol.EnvRestartExitCode, err)
	}
	// Optional: agents injected by older managers do not hold probes.
	if v, _ := lookup(protocol.EnvBarrierHold); v != "" {
		millis, err := strconv.Atoi(v)
		if err != nil || millis < 0 {
			return cfg, fmt.Errorf("%s=%q: want a number of milliseconds", protocol.EnvBarrierHold, v)
		}
		cfg.BarrierHold = time.Duration(millis) * time.Millisecond
	}
	// Optional as well: without it the agent reads its Pod when it starts.
	cfg.PodEpoch = EpochFromEnv(lookup(protocol.EnvPodEpoch))
	switch scope, _ := lookup(protocol.EnvRestartScope); scope {
	case "", protocol.RestartScopeContainer:
	case protocol.RestartScopeProcess:
		supervised, _ := lookup(protocol.EnvSupervisedContainers)
		if supervised == "" {
			return cfg, fmt.Errorf("%s is %s but %s is not set; the mutating webhook sets both", protocol.EnvRestartScope, scope, protocol.EnvSupervisedContainers)
		}
		cfg.Process = &ProcessConfig{Supervised: strings.Split(supervised, ",")}
		// A count that is not one (the annotation is the Pod's, which its
		// workers' token may write too) starts the count again: a wrong
		// count must not stop the agent.
		restarts, _ := lookup(protocol.EnvWorkerRestarts)
		if n, err := strconv.ParseInt(restarts, 10, 32); err == nil && n >= 0 {
			cfg.Process.WorkerRestarts = int32(n)
		}
	default:
		return cfg, fmt.Errorf("%s=%q: want %s or %s", protocol.EnvRestartScope, scope, protocol.RestartScopeContainer, protocol.RestartScopeProcess)
	}
	return cfg, nil
}

// EpochFromEnv reads the epoch the Downward API gave in
// protocol.EnvPodEpoch: value is the variable's, set whether it is set. An
// unset variable is nil, an empty one (a Pod without the annotation) 0. A
// value that is not an epoch is nil too: the agent then reads its Pod,
// which says what is wrong with the annotation.
func EpochFromEnv(value string, set bool) *int32 {
	if !set {
		return nil
	}
	if value == "" {
		return new(int32)
	}
	epoch, err := protocol.ParseEpoch(value, false)
	if err != nil {
		return nil
	}
	return &epoch
}

// Run runs the agent until ctx ends (exit code 0) or its epoch is
// deprecated (the restart exit code).
func Run(ctx context.Context, log logr.Logger, cfg Config, t Transport) (int, error) {
	lifted := newBarrier()
	write := t.ReportEpoch
	var (
		hub            *processHub
		pt             ProcessTransport
		exits, ready   <-chan struct{}
		workerRestarts int32
	)
	if cfg.Process != nil {
		var ok bool
		if pt, ok = t.(ProcessTransport); !ok {
			return 1, errors.New("process scope needs a transport that reports the workers' exits")
		}
		hub = newProcessHub(cfg.Process.Supervised)
		hub.anyPeer = cfg.Process.AnyPeer
		exits, ready = hub.exited, hub.readied
		workerRestarts = cfg.Process.WorkerRestarts
		write = func(ctx context.Context, epoch int32) error { return pt.ReportProcessEpoch(ctx, epoch, workerRestarts) }
	}
	l := cfg.Listener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", cfg.Listen); err != nil {
			return 1, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
		}
	}
	// Closed here as well as by the server: the port must be free when Run
	// returns, even if the server had not begun serving yet.
	defer l.Close()
	path := cfg.BarrierPath
	if path == "" {
		path = protocol.BarrierPath
	}
	srv := serve(log, l, path, lifted, cfg.BarrierHold, hub)
	defer srv.Close()

	updates, err := t.Broadcasts(ctx)
	if err != nil {
		return 1, fmt.Errorf("watching the broadcast: %w", err)
	}
	var first protocol.Broadcast
	select {
	case <-ctx.Done():
		return 0, nil
	case first = <-updates:
	}
	var podEpoch int32
	if cfg.PodEpoch != nil {
		podEpoch = *cfg.PodEpoch
	}
	var workers Workers
	// Reporting directly, the agent's epoch is not on its Pod: the
	// Downward API's copy says nothing of it, and Self asks the
	// controller.
	envEpoch := cfg.PodEpoch
	if dt, ok := t.(interface{ Direct() bool }); ok && dt.Direct() {
		envEpoch = nil
	}
	readPod := NeedsPod(first, envEpoch)
	if readPod {
		read, w, err := t.Self(ctx)
		if err != nil {
			return 1, fmt.Errorf("reading its own Pod: %w", err)
		}
		// Both are lower bounds of the epoch the Pod carries now.
		podEpoch, workers = max(podEpoch, read), w
	}
	m := NewMachine(cfg.ReplicatedJob)
	d := m.Start(first, podEpoch, workers)
	last := first
	// In process scope a worker let through by an earlier run of the agent
	// may still run: a new epoch waits for word from every supervisor, for
	// a while. A Pod without an epoch has run no worker.
	var unheard time.Duration
	if podEpoch > 0 {
		unheard = unheardWait
	}
	log.Info("started", "epoch", m.Epoch(), "resumed", d.ReportEpoch == 0, "synced", first.SyncedEpoch, "deprecated", first.DeprecatedEpoch,
		"envEpoch", cfg.PodEpoch, "readPod", readPod)
	if cfg.Process != nil && cfg.Process.SupervisorBinary != "" {
		if err := awaitFile(ctx, log, cfg.Process.SupervisorBinary, installWait); err != nil {
			if ctx.Err() != nil {
				return 0, nil
			}
			// Exited, the agent's container is started again by the
			// kubelet, and its hook run again.
			return 1, err
		}
	}
	for {
		if d.ReportEpoch != 0 {
			if hub != nil {
				// The supervisors stop the workers of any other epoch; the
				// new one is reported once they have.
				hub.setState(d.ReportEpoch, false)
				stuck, unknown := hub.waitStopped(ctx, unheard)
				if ctx.Err() == nil && (len(stuck) > 0 || (unheard > 0 && len(unknown) > 0)) {
					log.Info("reporting the new epoch without word that every supervisor stopped its worker", "epoch", d.ReportEpoch,
						"stillStopping", stuck, "neverHeard", unknown)
				}
			}
			ahead, err := report(ctx, log, t, write, d.ReportEpoch)
			if err != nil {
				return 0, nil // ctx ended
			}
			if ahead != nil {
				// The Pod carries a later epoch than the one this start was
				// given (the kubelet's copy of the Pod was behind, and so
				// was the broadcast): start again from what the Pod says.
				// Nothing was lifted yet, since nothing is before the
				// report.
				m = NewMachine(cfg.ReplicatedJob)
				d = m.Start(last, ahead.epoch, ahead.workers)
				log.Info("the Pod carries a later epoch: started again from it", "podEpoch", ahead.epoch, "epoch", m.Epoch(), "resumed", d.ReportEpoch == 0)
				continue
			}
		}
		if d.LiftBarrier {
			lifted.lift(m.Epoch())
			if hub != nil {
				hub.setState(m.Epoch(), true)
			}
			log.Info("barrier lifted", "epoch", m.Epoch())
		}
		if d.Restart && hub != nil {
			from := m.Epoch()
			workerRestarts++
			m = NewMachine(cfg.ReplicatedJob)
			d = m.Start(last, from, WorkersStopped)
			lifted.reset()
			log.Info("epoch deprecated: restarting the workers' processes", "from", from, "epoch", m.Epoch(), "workerRestarts", workerRestarts)
			continue
		}
		if d.Restart {
			// Not the restart code if the kubelet is already stopping this
			// Pod (SIGTERM): that would restart it in place instead.
			code := FinalExitCode(ctx, cfg.RestartExitCode, cfg.RestartExitCode)
			log.Info("epoch deprecated: exiting to restart the Pod in place", "epoch", m.Epoch(), "exitCode", code, "podStopping", code != cfg.RestartExitCode)
			return code, nil
		}
		select {
		case <-ctx.Done():
			return 0, nil
		case b, ok := <-updates:
			if !ok {
				return 0, nil
			}
			last = b
			d = m.Observe(b)
		case <-ready:
			d = Decision{}
			if epoch := hub.readyEpoch(); epoch != 0 && epoch == m.Epoch() {
				log.Info("every worker is ready", "epoch", epoch)
				if err := Retry(ctx, func(ctx context.Context) error { return pt.ReportReady(ctx, epoch) }, refused); err != nil {
					if ctx.Err() != nil {
						return 0, nil
					}
					log.Error(err, "reporting the workers ready was refused")
				}
			}
		case <-exits:
			d = Decision{}
			for _, e := range hub.takeExits() {
				if e.Epoch != m.Epoch() {
					continue
				}
				log.Info("a worker exited: reporting it", "container", e.Container, "exitCode", e.Code, "epoch", e.Epoch)
				if err := Retry(ctx, func(ctx context.Context) error { return pt.ReportWorkerExit(ctx, e) }, refused); err != nil {
					if ctx.Err() != nil {
						return 0, nil
					}
					log.Error(err, "reporting a worker's exit was refused", "container", e.Container)
				}
			}
		}
	}
}

// refused says a report was refused as it stands (ErrReportRefused):
// trying it again would not help.
func refused(err error) bool { return errors.Is(err, ErrReportRefused) }

// FinalExitCode is the code the agent's process exits with: code, except
// that once ctx has ended (the kubelet is stopping the Pod: SIGTERM) it is
// never the restart code, which would restart a Pod on its way out in
// place. The check is made again at the very end because the signal may
// come after Run decided to restart.
func FinalExitCode(ctx context.Context, code, restartCode int) int {
	if code == restartCode && ctx.Err() != nil {
		return 0
	}
	return code
}

// podFacts is what the agent read of its Pod.
type podFacts struct {
	epoch   int32
	workers Workers
}

// ErrReportRefused marks a report the API server refused as it stands
// (403, 422): the agents' admission policy refuses an epoch lower than the
// Pod's, and so does a missing grant, until the controller makes it.
var ErrReportRefused = errors.New("report refused")

// errPodAhead ends the retries of a report that the Pod's epoch has
// overtaken.
var errPodAhead = errors.New("the Pod carries a later epoch")

// report writes the epoch, retrying until it is written: the whole group
// waits for it. The first time the write is refused for good (403, 422:
// the agents' admission policy refuses a lower epoch than the Pod
// carries), the agent reads its Pod: if its epoch is later than the one
// reported, report returns it instead of trying again. Other refusals
// (the agents' RoleBinding not created yet, say) are retried as before.
func report(ctx context.Context, log logr.Logger, t Transport, write func(context.Context, int32) error, epoch int32) (*podFacts, error) {
	var ahead *podFacts
	checked := false
	err := Retry(ctx, func(ctx context.Context) error {
		err := write(ctx, epoch)
		if err == nil {
			return nil
		}
		if !checked && errors.Is(err, ErrReportRefused) {
			// Checked once the read succeeds: a read refused too (the
			// grants not made yet) is tried again with the next refusal.
			read, w, rerr := t.Self(ctx)
			checked = rerr == nil
			if rerr == nil && read > epoch {
				ahead = &podFacts{read, w}
				return errPodAhead
			}
		}
		log.V(1).Info("reporting the epoch failed; retrying", "epoch", epoch, "error", err)
		return err
	}, func(err error) bool { return errors.Is(err, errPodAhead) })
	if ahead != nil {
		return ahead, nil
	}
	return nil, err
}

// barrier is closed once lifted, at epoch; in process scope it is held
// again (reset) when the agent moves to a new epoch.
type barrier struct {
	mu     sync.Mutex
	ch     chan struct{}
	lifted bool
	epoch  atomic.Int32
}

func newBarrier() *barrier { return &barrier{ch: make(chan struct{})} }

func (b *barrier) lift(epoch int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.lifted {
		b.lifted = true
		b.epoch.Store(epoch)
		close(b.ch)
	}
}

// reset holds the barrier again.
func (b *barrier) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lifted {
		b.lifted = false
		b.ch = make(chan struct{})
	}
}

func (b *barrier) liftedCh() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

// wait reports whether the barrier is lifted, waiting up to hold for it.
func (b *barrier) wait(ctx context.Context, hold time.Duration) bool {
	ch := b.liftedCh()
	select {
	case <-ch:
		return true
	default:
	}
	if hold <= 0 {
		return false
	}
	t := time.NewTimer(hold)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// serve answers /healthz always and the barrier's path once lifted,
// holding a request up to hold for the lift, on l until the server is
// closed.
func serve(log logr.Logger, l net.Listener, barrierPath string, lifted *barrier, hold time.Duration, hub *processHub) *http.Server {
	mux := http.NewServeMux()
	if hub != nil {
		hub.serveSupervisors(mux)
	}
	mux.HandleFunc(protocol.HealthPath, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc(barrierPath, func(w http.ResponseWriter, r *http.Request) {
		// The body says at which epoch the barrier lifted, so that a
		// worker can log what it was let through at; probes read only
		// the status.
		w.Header().Set("Content-Type", "application/json")
		if lifted.wait(r.Context(), hold) {
			w.WriteHeader(http.StatusOK)
			fmt.Fprintf(w, `{"lifted":true,"epoch":%d}`+"\n", lifted.epoch.Load())
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, `{"lifted":false}`)
	})
	srv := &http.Server{Addr: l.Addr().String(), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "serving the barrier")
		}
	}()
	return srv
}

// installWait bounds the wait for the postStart hook's copy of the
// supervisor: a hook that never ended (a kubelet restarted in the middle
// of it does not run it again) is run again by the agent's exit.
var installWait = time.Minute

// awaitFile waits until path exists, saying once that it waits, for at
// most timeout.
func awaitFile(ctx context.Context, log logr.Logger, path string, timeout time.Duration) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for said := false; ; {
		if _, err := os.Stat(path); err == nil {
			if said {
				log.Info("the supervisor's binary is installed", "path", path)
			}
			return nil
		}
		if !said {
			log.Info("waiting for the agent container's postStart hook to install the supervisor's binary before reporting an epoch", "path", path)
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("the supervisor's binary %s is not there %v after the agent's start: its container's postStart hook did not install it (see the Pod's events and the kubelet's log)", path, timeout)
		case <-tick.C:
		}
	}
}
