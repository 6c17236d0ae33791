package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/inplace-dev/inplace/api/protocol"
)

// Config is what the supervisor runs and whom it asks.
type Config struct {
	// Agent is the agent's barrier address, host:port.
	Agent string
	// Container is the name of the worker container.
	Container string
	// Restart are the worker's exit codes that restart in place; any other
	// ends the container with that code.
	Restart ExitCodes
	// GracePeriod is how long a worker being stopped has between SIGTERM
	// and SIGKILL: the Pod's terminationGracePeriodSeconds.
	GracePeriod time.Duration
	// Command is the worker's command and arguments.
	Command []string
	// Log receives the supervisor's own lines (the container's stderr).
	Log io.Writer
	// Signals, if set, replaces the process's signals (tests).
	Signals <-chan os.Signal
	// Readiness, if set, is run against each worker started, and its
	// passing reported to the agent.
	Readiness *protocol.ReadinessProbe
	// Processes, if set, runs the worker instead of the operating system's
	// process groups: the simulated nodes model a worker with it.
	Processes Processes
	// Client, if set, is how the supervisor reaches the agent (the
	// simulated nodes' Pod network).
	Client *http.Client
	// ParkDeadline, if set, restarts the worker in-process: at a new
	// epoch the worker is asked to park (api/protocol/inprocess.go) and stopped
	// only if it has not within this deadline. Not with Processes.
	ParkDeadline time.Duration
	// Control is the control socket's address in-process ("@name": the
	// abstract namespace); empty: a fresh name.
	Control string
	// Standby, in-process, keeps a second process of the worker's command
	// started, waiting on the control socket: the worker's replacement
	// when it fails, with its imports done (standby.go).
	Standby bool
}

// Processes starts and signals the worker's processes.
type Processes interface {
	// Start starts the worker at epoch and returns its id (a pid).
	Start(epoch int32) (int, error)
	// Signal signals the worker's process group; a group gone is no error.
	Signal(id int, sig syscall.Signal)
	// Exits delivers the exits of the workers started, by id.
	Exits() <-chan ChildExit
}

// ChildExit is a worker's exit.
type ChildExit struct {
	ID, Code int
}

// forwarded are the signals passed on to the worker's process group.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH}

// Run supervises the worker until the container must end, and returns the
// container's exit code.
func Run(ctx context.Context, cfg Config) int {
	if len(cfg.Command) == 0 {
		fmt.Fprintln(cfg.Log, "inplace-supervisor: no command to run after --")
		return 2
	}
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &supervisor{
		cfg:     cfg,
		lastRun: -1,
		kick:    make(chan struct{}, 1),
		client:  cfg.Client,
		procs:   cfg.Processes,
	}
	if s.client == nil {
		s.client = &http.Client{
			// Never through a proxy of the worker's environment.
			Transport: &http.Transport{Proxy: nil, DisableCompression: true},
			Timeout:   RequestTimeout,
		}
	}
	if s.procs == nil {
		if os.Getpid() != 1 {
			// Orphans of the worker come to us, as they would to PID 1.
			if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
				fmt.Fprintf(cfg.Log, "inplace-supervisor: cannot become the subreaper of the worker's orphans: %v\n", errno)
			}
		}
		// Before the first fork: no exit may go unseen.
		s.reaper = newReaper()
		procs := &osProcesses{command: cfg.Command, exits: s.reaper.run(ctx)}
		if cfg.ParkDeadline > 0 {
			ctl, err := listenControl(cfg.Control, cfg.Container)
			if err != nil {
				// The worker is then stopped at each epoch, as in process
				// scope: slower, not wrong.
				fmt.Fprintf(cfg.Log, "inplace-supervisor: cannot open the control socket, restarting the worker as a process at each epoch: %v\n", err)
			} else {
				s.ctl = ctl
				go ctl.serve(ctx, s.logf)
				procs.env = []string{protocol.EnvWorkerControl + "=" + ctl.addr,
					protocol.EnvWorkerDeadline + "=" + strconv.FormatFloat(cfg.ParkDeadline.Seconds(), 'f', -1, 64)}
				s.osProcs = procs
			}
		}
		s.procs = procs
	}
	sigs := cfg.Signals
	if sigs == nil {
		ch := make(chan os.Signal, 8)
		signal.Notify(ch, forwarded...)
		defer signal.Stop(ch)
		sigs = ch
	}
	states := make(chan protocol.SupervisorState)
	go s.poll(ctx, states)
	var controls <-chan controlEvent
	if s.ctl != nil {
		controls = s.ctl.events
	}
	code := s.loop(ctx, states, s.procs.Exits(), sigs, controls)
	if s.w != nil {
		s.procs.Signal(s.w.pid, syscall.SIGKILL)
		s.setRunning(0)
	}
	s.dropStandby()
	s.farewell()
	return code
}

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// stateHold is how long the agent holds a state request that has nothing
// new (the agent's side of it is agent.supervisorHold).
const stateHold = 20 * time.Second

// RequestTimeout bounds each request to the agent: a long poll the agent
// holds for stateHold, with room to spare. A connection that stops
// answering (an agent gone without closing it) is given up and asked
// again.
const RequestTimeout = stateHold + 10*time.Second

type supervisor struct {
	cfg    Config
	client *http.Client
	// running is the epoch the worker runs at, 0 for none: the poller
	// tells the agent.
	running atomic.Int32
	// gen counts the changes of running; the agent ignores a report older
	// than the start it last granted.
	gen atomic.Uint64
	// epoch is the agent's epoch as last seen.
	epoch atomic.Int32
	kick  chan struct{}

	state protocol.SupervisorState
	w     *worker
	// lastRun is the last epoch a worker was started at (-1: none): a
	// worker starts at most once per epoch.
	lastRun     int64
	terminating bool
	killTimer   *time.Timer
	retry       *time.Timer
	reaper      *reaper
	procs       Processes
	// stopProbe ends the readiness probe of the running worker.
	stopProbe context.CancelFunc
	// ctl is the control socket in-process, nil otherwise; conns are the
	// running worker's connections to it.
	ctl       *control
	conns     map[*controlConn]bool
	parkTimer *time.Timer
	// osProcs are the operating system's processes, in-process; standby
	// is the worker's standby, if one runs, and standbyTimer starts the
	// next.
	osProcs      *osProcesses
	standby      *standby
	standbyTimer *time.Timer
}

type worker struct {
	pid      int
	epoch    int32
	stopping bool
	// parking: asked to park, in-process; parked: it has, and waits in its
	// process for the next barrier.
	parking, parked bool
	parkAsked       time.Time
	// failed: it said it fails ("failed") with a code that restarts in
	// place, and the restart began; it is stopping on its own. killed:
	// the supervisor sent it SIGKILL.
	failed, killed bool
}

func (s *supervisor) logf(format string, args ...any) {
	fmt.Fprintf(s.cfg.Log, "inplace-supervisor: "+format+"\n", args...)
}

func (s *supervisor) loop(ctx context.Context, states <-chan protocol.SupervisorState, children <-chan ChildExit, sigs <-chan os.Signal, controls <-chan controlEvent) int {
	var killC, retryC, parkC, standbyC <-chan time.Time
	stop := func() {
		s.killTimer = time.NewTimer(s.cfg.GracePeriod)
		killC = s.killTimer.C
	}
	for {
		select {
		case <-ctx.Done():
			return 1
		case st := <-states:
			s.state = st
			s.epoch.Store(st.Epoch)
		case c := <-children:
			if s.standby != nil && c.ID == s.standby.pid {
				s.standbyExited(c.Code)
				continue
			}
			if s.w == nil || c.ID != s.w.pid {
				continue // an orphan, reaped
			}
			if code, done := s.exited(ctx, c.Code); done {
				return code
			}
			killC, parkC = nil, nil
		case sig := <-sigs:
			if sig == syscall.SIGTERM || sig == syscall.SIGINT {
				s.terminating = true
			}
			if s.terminating {
				s.dropStandby()
			}
			if s.w != nil {
				s.procs.Signal(s.w.pid, sig.(syscall.Signal))
				continue
			}
			if s.terminating {
				return 128 + int(sig.(syscall.Signal))
			}
			continue
		case <-killC:
			if s.w != nil {
				s.logf("the worker of epoch %d did not stop within %s: SIGKILL", s.w.epoch, s.cfg.GracePeriod)
				s.w.killed = true
				s.procs.Signal(s.w.pid, syscall.SIGKILL)
			}
			killC = nil
			continue
		case <-retryC:
			retryC = nil
		case ev := <-controls:
			if s.controlEvent(ctx, ev) {
				// Failing: its own exit ends it, or SIGKILL after the
				// grace period.
				stop()
			}
		case <-standbyC:
			standbyC = nil
			s.startStandby()
		case <-parkC:
			parkC = nil
			if s.w != nil && s.w.parking {
				s.logf("the worker of epoch %d did not park within %s: stopping its process group", s.w.epoch, s.cfg.ParkDeadline)
				s.stopWorker()
				// A worker that did not park may be a frozen one (stopped
				// by a debugger, or a test standing in for a hung peer):
				// continued, it takes its SIGTERM now, not at SIGKILL.
				s.procs.Signal(s.w.pid, syscall.SIGCONT)
				stop()
			}
			continue
		}
		stopping, parking, code, done := s.act(ctx)
		if done {
			return code
		}
		if stopping {
			stop()
		}
		if parking {
			s.parkTimer = time.NewTimer(s.cfg.ParkDeadline)
			parkC = s.parkTimer.C
		}
		if s.standbyTimer != nil {
			standbyC, s.standbyTimer = s.standbyTimer.C, nil
		}
		if s.retry != nil {
			retryC, s.retry = s.retry.C, nil
		}
	}
}

// act moves the worker towards the agent's state: stop (or, in-process,
// park) a worker of another epoch, start one behind a lifted barrier (or
// resume the parked one). It reports whether it began a stop or asked the
// worker to park, or the container's exit code if it must end.
func (s *supervisor) act(ctx context.Context) (stopping, parking bool, code int, done bool) {
	if s.w != nil && !s.w.parked {
		// Epoch 0 is no epoch (in-place restarts off): a worker runs on.
		if s.w.stopping || s.w.parking || s.state.Epoch == s.w.epoch || s.state.Epoch == 0 {
			return false, false, 0, false
		}
		// A worker with no connection cannot hear it: it is stopped at
		// once, as one that does not speak the protocol.
		if s.ctl != nil && !s.terminating && len(s.conns) > 0 {
			s.logf("epoch %d is over (the agent is at epoch %d): asking the worker to park", s.w.epoch, s.state.Epoch)
			s.w.parking, s.w.parkAsked = true, time.Now()
			s.sendAll(protocol.WorkerLine{Word: protocol.WorkerStop, Epoch: protocol.Epoch(s.w.epoch)})
			return false, true, 0, false
		}
		s.logf("epoch %d is over (the agent is at epoch %d): stopping the worker's process group", s.w.epoch, s.state.Epoch)
		s.stopWorker()
		return true, false, 0, false
	}
	if s.terminating || !s.state.Lifted || int64(s.state.Epoch) <= s.lastRun {
		return false, false, 0, false
	}
	if s.w != nil && len(s.conns) == 0 {
		// Parked, then gone from the control socket: it cannot be told
		// to run. A new process runs instead.
		s.logf("the parked worker of epoch %d has left the control socket: stopping its process group", s.w.epoch)
		s.stopWorker()
		return true, false, 0, false
	}
	ok, err := s.askStart(ctx, s.state.Epoch)
	if err != nil {
		s.logf("asking the agent to start at epoch %d: %v; retrying", s.state.Epoch, err)
		s.retry = time.NewTimer(100 * time.Millisecond)
		return false, false, 0, false
	}
	if !ok {
		return false, false, 0, false // the agent moved on; its new state follows
	}
	epoch := s.state.Epoch
	if s.w != nil { // parked
		s.w.parked, s.w.epoch = false, epoch
		s.lastRun = int64(epoch)
		s.setRunning(epoch)
		s.logf("barrier of epoch %d lifted: resumed the worker in its process (pid %d)", epoch, s.w.pid)
		s.sendAll(protocol.WorkerLine{Word: protocol.WorkerStart, Epoch: protocol.Epoch(epoch)})
		s.startProbe(ctx, epoch)
		// A standby whose start fell while the worker parked starts now.
		s.scheduleStandby()
		return false, false, 0, false
	}
	if sb := s.standby; sb != nil {
		// The standby has done what the worker's command does before it
		// asks to run: it takes the failed worker's place at once.
		s.standby = nil
		s.w = &worker{pid: sb.pid, epoch: epoch}
		s.conns = sb.conns
		s.lastRun = int64(epoch)
		s.setRunning(epoch)
		// Logged first, so that the worker's own lines follow it.
		s.logf("barrier of epoch %d lifted: started the worker (pid %d, the standby)", epoch, sb.pid)
		s.sendAll(protocol.WorkerLine{Word: protocol.WorkerStart, Epoch: protocol.Epoch(epoch)})
		s.startProbe(ctx, epoch)
		s.scheduleStandby()
		return false, false, 0, false
	}
	pid, err := s.procs.Start(epoch)
	if err != nil {
		s.logf("starting %q: %v", s.cfg.Command[0], err)
		return false, false, 127, true
	}
	s.w = &worker{pid: pid, epoch: epoch}
	s.lastRun = int64(epoch)
	s.setRunning(epoch)
	s.startProbe(ctx, epoch)
	s.logf("barrier of epoch %d lifted: started the worker (pid %d)", epoch, pid)
	return false, false, 0, false
}

// stopWorker sends SIGTERM to the worker's process group, whatever it was
// doing at its epoch; the caller arms the SIGKILL after the grace period.
func (s *supervisor) stopWorker() {
	s.w.parking, s.w.parked, s.w.stopping = false, false, true
	s.procs.Signal(s.w.pid, syscall.SIGTERM)
}

// startProbe runs the readiness probe, if any, against the worker at
// epoch.
func (s *supervisor) startProbe(ctx context.Context, epoch int32) {
	if s.cfg.Readiness == nil {
		return
	}
	probeCtx, cancel := context.WithCancel(ctx)
	s.stopProbe = cancel
	go s.probeReady(probeCtx, epoch)
}

func (s *supervisor) endProbe() {
	if s.stopProbe != nil {
		s.stopProbe()
		s.stopProbe = nil
	}
}

// controlEvent takes what a worker's connection did: it opened, wrote
// "parked" or "failed", or closed. It reports whether the worker said it
// fails, and the restart began.
func (s *supervisor) controlEvent(ctx context.Context, ev controlEvent) (failing bool) {
	switch {
	case ev.opened:
		if s.standby != nil && ev.conn.from(s.standby.pid) {
			// Told nothing until it takes a failed worker's place.
			s.standby.conns[ev.conn] = true
			s.logf("standby ready (pid %d)", s.standby.pid)
			return false
		}
		if s.w == nil || s.w.stopping || !ev.conn.from(s.w.pid) {
			_ = ev.conn.conn.Close() // not of the worker that runs
			return false
		}
		if s.conns == nil {
			s.conns = map[*controlConn]bool{}
		}
		s.conns[ev.conn] = true
		if len(s.conns) == 1 && !s.w.parked {
			// The worker has done its imports: its standby starts now,
			// not beside it.
			s.scheduleStandby()
		}
		// The epoch it runs at, and, if that is over, that it is.
		if ev.conn.send(protocol.WorkerLine{Word: protocol.WorkerStart, Epoch: protocol.Epoch(s.w.epoch)}) && (s.w.parking || s.w.parked) {
			ev.conn.send(protocol.WorkerLine{Word: protocol.WorkerStop, Epoch: protocol.Epoch(s.w.epoch)})
		}
		return false
	case ev.closed:
		delete(s.conns, ev.conn)
		if s.standby != nil {
			delete(s.standby.conns, ev.conn)
		}
		_ = ev.conn.conn.Close()
	case ev.line.Word == protocol.WorkerFailed:
		return s.failing(ctx, ev)
	default:
		if s.conns[ev.conn] {
			ev.conn.parked = ev.line.Epoch
		}
	}
	s.checkParked()
	return false
}

// failing takes a worker's word that it fails at its epoch with a code:
// if the code restarts in place, the restart begins now, while the process
// ends, as it would at the exit (the exit then only ends the process).
// Otherwise, or from a worker not running at that epoch, the exit is
// judged when it comes.
func (s *supervisor) failing(ctx context.Context, ev controlEvent) bool {
	w := s.w
	var why string
	switch {
	case w == nil || !s.conns[ev.conn]:
		why = "it is not the running worker's"
	case ev.conn.lineage[0] != w.pid:
		// A process the worker launched (a rank under a launcher) fails
		// alone: the worker, and its other processes, run on until the
		// worker's own exit says what it does.
		why = "it is a process the worker started, not the worker"
	case s.terminating || w.stopping:
		why = "the worker is being stopped"
	case w.parking || w.parked:
		why = "the worker parks"
	case w.epoch == 0 || protocol.Epoch(w.epoch) != ev.line.Epoch:
		why = fmt.Sprintf("the worker runs at epoch %d", w.epoch)
	case !s.cfg.Restart.Matches(ev.line.Code):
		why = "the code does not restart in place"
	}
	if why != "" {
		s.logf("%q on the control socket changes nothing (%s): the exit is judged when it comes", ev.line, why)
		return false
	}
	s.logf("the worker of epoch %d fails with code %d: asking for an in-place restart while its process ends", w.epoch, ev.line.Code)
	w.stopping, w.failed = true, true
	s.endProbe()
	// No worker of that epoch runs any more: the agent may report the
	// next one. The next process runs once this one has ended.
	s.setRunning(0)
	go s.reportExit(ctx, w.epoch, ev.line.Code)
	return true
}

// checkParked takes a worker asked to park as parked once every one of its
// connections has said so (there is at least one).
func (s *supervisor) checkParked() {
	if s.w == nil || !s.w.parking || len(s.conns) == 0 {
		return
	}
	for cc := range s.conns {
		if cc.parked != protocol.Epoch(s.w.epoch) {
			return
		}
	}
	if s.parkTimer != nil {
		s.parkTimer.Stop()
	}
	s.w.parking, s.w.parked = false, true
	s.endProbe()
	s.logf("the worker of epoch %d parked in %s", s.w.epoch, time.Since(s.w.parkAsked).Round(time.Millisecond))
	// No worker of that epoch runs: the agent may report the new one.
	s.setRunning(0)
}

// sendAll writes a line to every connection of the worker; a connection
// that cannot take it is dropped.
func (s *supervisor) sendAll(l protocol.WorkerLine) {
	for cc := range s.conns {
		if !cc.send(l) {
			delete(s.conns, cc)
		}
	}
}

// closeConns drops the connections of a worker gone.
func (s *supervisor) closeConns() {
	for cc := range s.conns {
		_ = cc.conn.Close()
	}
	s.conns = nil
}

// exited handles the worker's exit with code.
func (s *supervisor) exited(ctx context.Context, code int) (int, bool) {
	w := s.w
	s.w = nil
	s.endProbe()
	s.closeConns()
	if s.parkTimer != nil {
		s.parkTimer.Stop()
	}
	// What the worker left of its process group goes with it, as it would
	// with its container.
	s.procs.Signal(w.pid, syscall.SIGKILL)
	if s.killTimer != nil {
		s.killTimer.Stop()
	}
	s.setRunning(0)
	switch {
	case s.terminating:
		return code, true
	case w.failed && (code == 0 || w.killed || s.cfg.Restart.Matches(code)):
		// Its restart began when it said it failed. (Exited with 0 after
		// saying it fails, it restarts too: the restart was asked for.)
		s.logf("the failing worker of epoch %d has ended (exit code %d)", w.epoch, code)
		return 0, false
	case w.stopping && !w.failed:
		s.logf("the worker of epoch %d stopped (exit code %d)", w.epoch, code)
		return 0, false
	case (w.parking || w.parked) && code != 0 && s.cfg.Restart.Matches(code):
		// It left the epoch another way: a new process starts behind the
		// next barrier. A code that does not restart in place is judged
		// below, as any exit the supervisor did not ask for.
		s.logf("the worker of epoch %d exited with code %d instead of parking", w.epoch, code)
		return 0, false
	case code == 0:
		return 0, true
	case w.epoch == 0 || !s.cfg.Restart.Matches(code):
		// In-place restarts are off, or the Job's podFailurePolicy judges
		// this code: the container ends with it, as in container scope.
		s.logf("the worker exited with code %d, which does not restart in place: the container exits with it", code)
		if w.epoch != 0 {
			// Told to the agent first, which tells the controller at
			// once: the kubelet reports the container's exit only at its
			// next relist, and the exits of the peers this one brings
			// down, which restart in place, reach the controller
			// through their agents before that. Bounded: the container
			// ends whether or not the agent hears it.
			fatalCtx, cancel := context.WithTimeout(ctx, fatalExitReportWait)
			s.reportExit(fatalCtx, w.epoch, code)
			cancel()
		}
		return code, true
	}
	s.logf("the worker of epoch %d exited with code %d: asking for an in-place restart", w.epoch, code)
	go s.reportExit(ctx, w.epoch, code)
	return 0, false
}

func (s *supervisor) setRunning(epoch int32) {
	s.running.Store(epoch)
	s.gen.Add(1)
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// osProcesses runs the worker as a process group of its own, reaped by
// the reaper.
type osProcesses struct {
	command []string
	exits   <-chan ChildExit
	// env is added to the worker's environment.
	env []string
}

// Start forks the worker in a process group of its own.
func (o *osProcesses) Start(epoch int32) (int, error) {
	env := []string{protocol.EnvWorkerEpoch + "=" + protocol.Epoch(epoch).String()}
	if epoch != 0 {
		// At epoch 0 in-place restarts are off: the worker runs once,
		// without the worker protocol, as it would with no supervisor.
		env = append(env, o.env...)
	}
	return o.fork(env)
}

// fork starts the command in a process group of its own, with the
// supervisor's environment and extra.
func (o *osProcesses) fork(extra []string) (int, error) {
	path, err := exec.LookPath(o.command[0])
	if err != nil {
		return 0, err
	}
	env := append(os.Environ(), extra...)
	return syscall.ForkExec(path, o.command, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
}

func (o *osProcesses) Signal(pid int, sig syscall.Signal) { signalGroup(pid, sig) }

func (o *osProcesses) Exits() <-chan ChildExit { return o.exits }

// signalGroup signals the worker's process group (its pid: the worker
// leads it). A group already gone (ESRCH) is not an error: the worker and
// what it left may have exited on their own.
func signalGroup(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
}

// reaper reaps every child of the process, the worker's orphans included,
// and delivers their exits: to whoever forked the child through forkExec,
// or else on run's channel.
type reaper struct {
	mu      sync.Mutex
	waiters map[int]chan int
}

func newReaper() *reaper { return &reaper{waiters: map[int]chan int{}} }

// forkExec forks a child whose exit code comes on the channel returned.
func (r *reaper) forkExec(path string, argv []string, attr *syscall.ProcAttr) (int, <-chan int, error) {
	// Held across the fork, so that the child's exit, however soon, finds
	// its waiter.
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := syscall.ForkExec(path, argv, attr)
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan int, 1)
	r.waiters[pid] = ch
	return pid, ch, nil
}

func (r *reaper) run(ctx context.Context) <-chan ChildExit {
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGCHLD)
	out := make(chan ChildExit, 16)
	go func() {
		defer signal.Stop(sig)
		for {
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if errors.Is(err, syscall.EINTR) {
					continue
				}
				if err != nil || pid <= 0 {
					break
				}
				code := ws.ExitStatus()
				if ws.Signaled() {
					code = 128 + int(ws.Signal())
				}
				r.mu.Lock()
				waiter, ok := r.waiters[pid]
				delete(r.waiters, pid)
				r.mu.Unlock()
				if ok {
					waiter <- code
					continue
				}
				select {
				case out <- ChildExit{pid, code}:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-sig:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// poll keeps a long poll of the agent's state open, delivering each new
// state; a change of the worker (kick) re-asks at once with it.
func (s *supervisor) poll(ctx context.Context, out chan<- protocol.SupervisorState) {
	var after uint64
	backoff, waited := 10*time.Millisecond, false
	for ctx.Err() == nil {
		reqCtx, cancel := context.WithCancel(ctx)
		finished, watched := make(chan struct{}), make(chan bool, 1)
		go func() {
			select {
			case <-s.kick:
				cancel()
				watched <- true
			case <-finished:
				watched <- false
			}
		}()
		st, err := s.getState(reqCtx, after)
		close(finished)
		// Waited for, so that this request's watcher never takes a kick
		// meant for the next one: the next request, built after the kick,
		// carries the worker's change.
		kicked := <-watched
		cancel()
		if err != nil {
			if kicked && ctx.Err() == nil {
				continue
			}
			if !waited {
				s.logf("waiting for the agent at %s: %v", s.cfg.Agent, err)
				waited = true
			}
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(2*backoff, 500*time.Millisecond)
			continue
		}
		backoff, waited = 10*time.Millisecond, false
		if st.Version == after {
			continue
		}
		after = st.Version
		select {
		case out <- st:
		case <-ctx.Done():
			return
		}
	}
}

// stopWithin is the longest a worker of an epoch that is over may take to
// stop running at it: in-process, the deadline to park, then the grace
// period if it did not.
func (s *supervisor) stopWithin() time.Duration {
	if s.ctl != nil {
		return s.cfg.ParkDeadline + s.cfg.GracePeriod
	}
	return s.cfg.GracePeriod
}

func (s *supervisor) url(path string, q url.Values) string {
	q.Set("container", s.cfg.Container)
	return (&url.URL{Scheme: "http", Host: s.cfg.Agent, Path: path, RawQuery: q.Encode()}).String()
}

func (s *supervisor) getState(ctx context.Context, after uint64) (protocol.SupervisorState, error) {
	var st protocol.SupervisorState
	q := url.Values{"after": {strconv.FormatUint(after, 10)}, "running": {protocol.Epoch(s.running.Load()).String()},
		"gen": {strconv.FormatUint(s.gen.Load(), 10)}, "grace": {strconv.Itoa(int(s.stopWithin().Seconds()))}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url(protocol.SupervisorStatePath, q), nil)
	if err != nil {
		return st, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s: %s", protocol.SupervisorStatePath, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func (s *supervisor) post(ctx context.Context, path string, q url.Values) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url(path, q), nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// askStart asks the agent's leave to start the worker at epoch: the agent
// grants it only while that epoch's barrier is lifted, and records it, so
// that it never reports a new epoch with a worker of an older one running.
func (s *supervisor) askStart(ctx context.Context, epoch int32) (bool, error) {
	// The generation the reports carry once the worker runs (setRunning).
	gen := strconv.FormatUint(s.gen.Load()+1, 10)
	code, err := s.post(ctx, protocol.SupervisorStartPath, url.Values{"epoch": {protocol.Epoch(epoch).String()}, "gen": {gen}})
	switch {
	case err != nil:
		return false, err
	case code == http.StatusOK:
		return true, nil
	case code == http.StatusConflict:
		return false, nil
	}
	return false, fmt.Errorf("%s: HTTP %d", protocol.SupervisorStartPath, code)
}

// farewell tells the agent, as the container ends, that no worker runs
// here any more: it would otherwise wait for this one at its next epoch.
func (s *supervisor) farewell() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = s.getState(ctx, 0) // version 0 is never the agent's: answered at once
}

// fatalExitReportWait bounds how long a container whose worker exited
// with a code that does not restart in place waits for its agent to hear
// of the exit.
const fatalExitReportWait = 300 * time.Millisecond

// reportExit tells the agent of the worker's exit, until it has heard it
// or has moved past the epoch.
func (s *supervisor) reportExit(ctx context.Context, epoch int32, code int) {
	q := url.Values{"epoch": {protocol.Epoch(epoch).String()}, "code": {strconv.Itoa(code)}}
	s.postUntilHeard(ctx, protocol.SupervisorExitPath, q, func() bool { return s.epoch.Load() == epoch })
}

// postUntilHeard posts to the agent until it answers (a 5xx, as an agent
// that has not chosen its epoch yet gives, is asked again), while ctx
// lasts and still says the report is wanted.
func (s *supervisor) postUntilHeard(ctx context.Context, path string, q url.Values, still func() bool) {
	for ctx.Err() == nil && still() {
		status, err := s.post(ctx, path, q)
		if err == nil && status < 500 {
			return
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}
