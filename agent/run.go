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
	epoch, err := protocol.ParseEpoch(value)
	if err != nil {
		return nil
	}
	n := int32(epoch)
	return &n
}

// Run runs the agent until ctx ends (exit code 0) or its epoch is
// deprecated (the restart exit code).
//
// Run drives one Machine: it feeds it the first broadcast and what the
// agent knows of its Pod (Start), acts on each of its decisions (drive),
// and feeds it the next input (next) until a decision, ctx or the
// broadcasts end the run.
func Run(ctx context.Context, log logr.Logger, cfg Config, t Transport) (int, error) {
	r, err := newRunner(log, cfg, t)
	if err != nil {
		return 1, err
	}
	l, err := listener(cfg)
	if err != nil {
		return 1, err
	}
	// Closed here as well as by the server: the port must be free when Run
	// returns, even if the server had not begun serving yet.
	defer l.Close()
	srv := serve(log, l, barrierPath(cfg), r.lifted, cfg.BarrierHold, r.hub)
	defer srv.Close()

	updates, err := t.Broadcasts(ctx)
	if err != nil {
		return 1, fmt.Errorf("watching the broadcast: %w", err)
	}
	// The current broadcast comes first. A watch closed before it gives the
	// zero broadcast, which the agent starts on; next then ends the run on
	// the closed watch once the start is acted on.
	var first protocol.Broadcast
	select {
	case <-ctx.Done():
		return 0, nil
	case first = <-updates:
	}
	pod, readPod, err := r.podAtStart(ctx, first)
	if err != nil {
		return 1, err
	}
	d := r.m.Start(first, pod.epoch, pod.workers)
	// In process scope a worker let through by an earlier run of the agent
	// may still run: a new epoch waits for word from every supervisor, for
	// a while. A Pod without an epoch has run no worker.
	if pod.epoch > 0 {
		r.unheard = unheardWait
	}
	log.Info("started", "epoch", r.m.Epoch(), "resumed", d.ReportEpoch == 0, "synced", first.SyncedEpoch, "deprecated", first.DeprecatedEpoch,
		"envEpoch", cfg.PodEpoch, "readPod", readPod)
	if err := r.awaitSupervisor(ctx); err != nil {
		if ctx.Err() != nil {
			return 0, nil
		}
		// Exited, the agent's container is started again by the kubelet,
		// and its hook run again.
		return 1, err
	}
	return r.drive(ctx, updates, d)
}

// runner is one run of the agent: its Machine, and what carries out the
// machine's decisions.
type runner struct {
	log    logr.Logger
	cfg    Config
	t      Transport
	m      *Machine
	lifted *barrier

	// In process scope only: the supervisors' hub, the transport's
	// process reports, the count of the Pod's worker restarts, and how
	// long a new epoch waits for a supervisor not heard from.
	hub            *processHub
	pt             ProcessTransport
	workerRestarts int32
	unheard        time.Duration
	// exits and ready signal a worker's exit and every worker's
	// readiness; nil, and never ready, outside process scope.
	exits, ready <-chan struct{}
}

func newRunner(log logr.Logger, cfg Config, t Transport) (*runner, error) {
	r := &runner{log: log, cfg: cfg, t: t, m: NewMachine(cfg.ReplicatedJob), lifted: newBarrier()}
	if cfg.Process == nil {
		return r, nil
	}
	var ok bool
	if r.pt, ok = t.(ProcessTransport); !ok {
		return nil, errors.New("process scope needs a transport that reports the workers' exits")
	}
	r.hub = newProcessHub(cfg.Process.Supervised)
	r.hub.anyPeer = cfg.Process.AnyPeer
	r.exits, r.ready = r.hub.exited, r.hub.readied
	r.workerRestarts = cfg.Process.WorkerRestarts
	return r, nil
}

// listener is cfg.Listener, or a new one on cfg.Listen.
func listener(cfg Config) (net.Listener, error) {
	if cfg.Listener != nil {
		return cfg.Listener, nil
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	return l, nil
}

// barrierPath is cfg.BarrierPath, or protocol.BarrierPath if it is empty.
func barrierPath(cfg Config) string {
	if cfg.BarrierPath == "" {
		return protocol.BarrierPath
	}
	return cfg.BarrierPath
}

// podAtStart is what the agent knows of its Pod when it starts: the epoch
// its environment gave, and, when that does not settle Start (NeedsPod),
// what a read of the Pod says; read says whether it read it.
func (r *runner) podAtStart(ctx context.Context, first protocol.Broadcast) (pod podFacts, read bool, err error) {
	if r.cfg.PodEpoch != nil {
		pod.epoch = *r.cfg.PodEpoch
	}
	// Reporting directly, the agent's epoch is not on its Pod: the
	// Downward API's copy says nothing of it, and Self asks the
	// controller.
	envEpoch := r.cfg.PodEpoch
	if dt, ok := r.t.(interface{ Direct() bool }); ok && dt.Direct() {
		envEpoch = nil
	}
	if !NeedsPod(first, envEpoch) {
		return pod, false, nil
	}
	epoch, workers, err := r.t.Self(ctx)
	if err != nil {
		return pod, true, fmt.Errorf("reading its own Pod: %w", err)
	}
	// Both are lower bounds of the epoch the Pod carries now.
	return podFacts{max(pod.epoch, epoch), workers}, true, nil
}

// awaitSupervisor waits, in process scope, for the postStart hook's copy
// of the supervisor: no epoch is reported before it exists (see
// ProcessConfig.SupervisorBinary).
func (r *runner) awaitSupervisor(ctx context.Context) error {
	if r.cfg.Process == nil || r.cfg.Process.SupervisorBinary == "" {
		return nil
	}
	return awaitFile(ctx, r.log, r.cfg.Process.SupervisorBinary, installWait)
}

// drive acts on the machine's decision d, then on each decision of the
// machine's next input, until one ends the run.
//
// The epoch is reported before the barrier lifts, since the JobSet syncs
// only on the reports. Two decisions lead to another without a new input:
// a report that finds the Pod ahead starts the machine again from the
// Pod's epoch, and in process scope a restart moves it to a new epoch
// instead of ending the run.
func (r *runner) drive(ctx context.Context, updates <-chan protocol.Broadcast, d Decision) (int, error) {
	for {
		if d.ReportEpoch != 0 {
			ahead, ok := r.reportEpoch(ctx, d.ReportEpoch)
			if !ok {
				return 0, nil
			}
			if ahead != nil {
				d = r.startFromPod(*ahead)
				continue
			}
		}
		if d.LiftBarrier {
			r.liftBarrier()
		}
		if d.Restart {
			if r.hub == nil {
				return r.exitToRestart(ctx), nil
			}
			d = r.restartWorkers()
			continue
		}
		var ok bool
		if d, ok = r.next(ctx, updates); !ok {
			return 0, nil
		}
	}
}

// next waits for the agent's next input and gives the machine its part:
// a broadcast is the machine's to decide on; a worker's exit or the
// workers' readiness, in process scope, is written on the Pod for the
// controller and decides nothing here. ok is false once ctx or the
// broadcasts have ended.
func (r *runner) next(ctx context.Context, updates <-chan protocol.Broadcast) (Decision, bool) {
	select {
	case <-ctx.Done():
		return Decision{}, false
	case b, ok := <-updates:
		if !ok {
			return Decision{}, false
		}
		return r.m.Observe(b), true
	case <-r.ready:
		return Decision{}, r.reportReady(ctx)
	case <-r.exits:
		return Decision{}, r.reportExits(ctx)
	}
}

// reportEpoch writes epoch on the Pod, in process scope once the
// supervisors have stopped the workers of any other epoch. ahead is what
// the Pod says if it carries a later epoch; ok is false if ctx ended.
func (r *runner) reportEpoch(ctx context.Context, epoch int32) (ahead *podFacts, ok bool) {
	if r.hub != nil {
		r.hub.setState(epoch, false)
		stuck, unknown := r.hub.waitStopped(ctx, r.unheard)
		if ctx.Err() == nil && (len(stuck) > 0 || (r.unheard > 0 && len(unknown) > 0)) {
			r.log.Info("reporting the new epoch without word that every supervisor stopped its worker", "epoch", epoch,
				"stillStopping", stuck, "neverHeard", unknown)
		}
	}
	ahead, err := report(ctx, r.log, r.t, r.write, epoch)
	return ahead, err == nil // report fails only once ctx ended
}

// write is the report of the agent's epoch, in process scope with the
// count of its Pod's worker restarts.
func (r *runner) write(ctx context.Context, epoch int32) error {
	if r.pt == nil {
		return r.t.ReportEpoch(ctx, epoch)
	}
	return r.pt.ReportProcessEpoch(ctx, epoch, r.workerRestarts)
}

// startFromPod starts the machine again from the epoch the Pod carries.
// The barrier stays as it is: nothing was lifted before the report.
func (r *runner) startFromPod(pod podFacts) Decision {
	d := r.m.StartFromPod(pod.epoch, pod.workers)
	r.log.Info("the Pod carries a later epoch: started again from it", "podEpoch", pod.epoch, "epoch", r.m.Epoch(), "resumed", d.ReportEpoch == 0)
	return d
}

// liftBarrier lets the workers through at the machine's epoch: the
// kubelet's probe, and in process scope the supervisors.
func (r *runner) liftBarrier() {
	epoch := r.m.Epoch()
	r.lifted.lift(epoch)
	if r.hub != nil {
		r.hub.setState(epoch, true)
	}
	r.log.Info("barrier lifted", "epoch", epoch)
}

// restartWorkers is process scope's restart: the machine moves to a new
// epoch, whose report has the supervisors stop the workers, and the
// barrier is held again until it lifts.
func (r *runner) restartWorkers() Decision {
	from := r.m.Epoch()
	r.workerRestarts++
	d := r.m.RestartWorkers()
	r.lifted.reset()
	r.log.Info("epoch deprecated: restarting the workers' processes", "from", from, "epoch", r.m.Epoch(), "workerRestarts", r.workerRestarts)
	return d
}

// exitToRestart is the agent's exit code at a deprecated epoch: the
// restart code, with which the kubelet restarts every container of the
// Pod in place.
func (r *runner) exitToRestart(ctx context.Context) int {
	// Not the restart code if the kubelet is already stopping this Pod
	// (SIGTERM): that would restart it in place instead.
	code := FinalExitCode(ctx, r.cfg.RestartExitCode, r.cfg.RestartExitCode)
	r.log.Info("epoch deprecated: exiting to restart the Pod in place", "epoch", r.m.Epoch(), "exitCode", code, "podStopping", code != r.cfg.RestartExitCode)
	return code
}

// reportReady writes that every worker is ready, if they are at the
// machine's epoch. A refusal is logged, not retried: it would be refused
// again. It returns false if ctx ended.
func (r *runner) reportReady(ctx context.Context) bool {
	epoch := r.hub.readyEpoch()
	if epoch == 0 || epoch != r.m.Epoch() {
		return true
	}
	r.log.Info("every worker is ready", "epoch", epoch)
	if err := Retry(ctx, func(ctx context.Context) error { return r.pt.ReportReady(ctx, epoch) }, refused); err != nil {
		if ctx.Err() != nil {
			return false
		}
		r.log.Error(err, "reporting the workers ready was refused")
	}
	return true
}

// reportExits writes the workers' exits at the machine's epoch; an exit
// of an epoch the agent has left restarts nothing. A refusal is logged,
// not retried. It returns false if ctx ended.
func (r *runner) reportExits(ctx context.Context) bool {
	for _, e := range r.hub.takeExits() {
		if e.Epoch != r.m.Epoch() {
			continue
		}
		r.log.Info("a worker exited: reporting it", "container", e.Container, "exitCode", e.Code, "epoch", e.Epoch)
		if err := Retry(ctx, func(ctx context.Context) error { return r.pt.ReportWorkerExit(ctx, e) }, refused); err != nil {
			if ctx.Err() != nil {
				return false
			}
			r.log.Error(err, "reporting a worker's exit was refused", "container", e.Container)
		}
	}
	return true
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
