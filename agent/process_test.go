package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inplace-dev/inplace/agent/supervisor"
	"github.com/inplace-dev/inplace/api/protocol"
)

// supervisorEnv makes the test binary run a supervisor, configured by the
// variable's JSON, instead of the tests: the supervisor must be a process
// of its own to reap, forward signals and exit with the container's code.
const supervisorEnv = "INPLACE_TEST_SUPERVISOR"

// supervisedWait bounds the waits on the supervisor and its worker: a
// stop that gives the worker its grace, on a machine that runs every
// package's tests at once under -race, took more than 10 s in CI.
const supervisedWait = time.Minute

type supervisorSpec struct {
	Agent, Restart string
	Grace          time.Duration
	Command        []string
	Readiness      *protocol.ReadinessProbe
	// ParkDeadline and Control: in-process scope.
	ParkDeadline time.Duration
	Control      string
	// Container is the worker container's name; "trainer" if empty.
	Container string
	Standby   bool
}

func TestMain(m *testing.M) {
	if v := os.Getenv(supervisorEnv); v != "" {
		var spec supervisorSpec
		if err := json.Unmarshal([]byte(v), &spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		codes, err := supervisor.ParseExitCodes(spec.Restart)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(supervisor.Run(context.Background(), supervisor.Config{
			Agent: spec.Agent, Container: cmp.Or(spec.Container, "trainer"), Restart: codes, GracePeriod: spec.Grace, Command: spec.Command, Log: os.Stderr,
			Readiness: spec.Readiness, ParkDeadline: spec.ParkDeadline, Control: spec.Control, Standby: spec.Standby,
		}))
	}
	os.Exit(m.Run())
}

// supervised is a supervisor process behind a real processHub, running a
// shell worker that logs to a file and obeys files in dir.
type supervised struct {
	t   *testing.T
	hub *processHub
	dir string
	cmd *exec.Cmd
	// done is closed when the supervisor has exited, with code.
	done chan struct{}
	code int
	// polled is the newest state version the supervisor has asked for
	// what follows: it has taken every state up to it.
	polled *atomic.Uint64
}

// worker is the shell worker: it sets its SIGTERM trap, leaves a child in
// its process group, then logs "start <epoch>" (so that a test that saw it
// start knows the trap is set); it exits with the code written to the file
// "exit", and logs "term" on SIGTERM unless the file "stubborn" exists.
const worker = `
trap 'if [ -e "$DIR/stubborn" ]; then echo ignored >> "$DIR/log"; else echo term >> "$DIR/log"; exit 0; fi' TERM
sleep 600 &
echo $! > "$DIR/child"
echo "start $INPLACE_EPOCH" >> "$DIR/log"
while true; do
  if [ -e "$DIR/exit" ]; then code=$(cat "$DIR/exit"); rm "$DIR/exit"; exit "$code"; fi
  sleep 0.02
done`

func startSupervised(t *testing.T, restart string, grace time.Duration) *supervised {
	t.Helper()
	return startSupervisedProbed(t, restart, grace, nil)
}

func startSupervisedProbed(t *testing.T, restart string, grace time.Duration, readiness *protocol.ReadinessProbe) *supervised {
	t.Helper()
	return startSupervisedSpec(t, supervisorSpec{Restart: restart, Grace: grace, Command: []string{"sh", "-c", worker}, Readiness: readiness})
}

// startSupervisedSpec starts a supervisor as spec says, behind a hub of
// its own (spec.Agent is set here).
func startSupervisedSpec(t *testing.T, spec supervisorSpec) *supervised {
	t.Helper()
	hub := newProcessHub([]string{"trainer"})
	mux := http.NewServeMux()
	hub.serveSupervisors(mux)
	polled := new(atomic.Uint64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if after, err := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64); err == nil {
			for old := polled.Load(); after > old && !polled.CompareAndSwap(old, after); old = polled.Load() {
			}
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	spec.Agent = strings.TrimPrefix(srv.URL, "http://")
	specJSON, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), supervisorEnv+"="+string(specJSON), "DIR="+dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &supervised{t: t, hub: hub, dir: dir, cmd: cmd, done: make(chan struct{}), polled: polled}
	go func() {
		defer close(s.done)
		var exit *exec.ExitError
		if err := cmd.Wait(); errors.As(err, &exit) {
			s.code = exit.ExitCode()
		} else if err != nil {
			s.code = -1
		}
	}()
	t.Cleanup(func() {
		// As the kubelet stops a container: the supervisor passes SIGTERM
		// on and takes the worker's process group with it.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Error("the supervisor did not exit on SIGTERM")
			_ = cmd.Process.Kill()
		}
	})
	return s
}

func (s *supervised) log() []string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	return strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' })
}

// waitLog waits until the worker's log lines are want.
func (s *supervised) waitLog(want ...string) {
	s.t.Helper()
	deadline := time.Now().Add(supervisedWait)
	for time.Now().Before(deadline) {
		if slices.Equal(s.log(), want) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("worker log %q, want %q", s.log(), want)
}

func (s *supervised) write(name, content string) {
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// waitTaken waits until the supervisor has taken the hub's current state:
// it asks for what follows it.
func (s *supervised) waitTaken() {
	s.t.Helper()
	s.hub.mu.Lock()
	version := s.hub.state.Version
	s.hub.mu.Unlock()
	deadline := time.Now().Add(supervisedWait)
	for s.polled.Load() < version {
		if time.Now().After(deadline) {
			s.t.Fatalf("the supervisor did not take state version %d", version)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitReported waits until a worker's exit, or its word that it fails,
// has reached the agent.
func (s *supervised) waitReported() {
	s.t.Helper()
	select {
	case <-s.hub.exited:
	case <-time.After(supervisedWait):
		s.t.Fatal("the exit was not reported")
	}
}

// waitHeard waits until the supervisor has asked the hub.
func (s *supervised) waitHeard() {
	s.t.Helper()
	deadline := time.Now().Add(supervisedWait)
	for time.Now().Before(deadline) {
		s.hub.mu.Lock()
		_, ok := s.hub.running["trainer"]
		s.hub.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.t.Fatal("the supervisor never asked the agent")
}

// waitRunning waits until the hub knows the supervisor runs a worker at
// epoch (0: none).
func (s *supervised) waitRunning(epoch int32) {
	s.t.Helper()
	deadline := time.Now().Add(supervisedWait)
	for time.Now().Before(deadline) {
		s.hub.mu.Lock()
		r, ok := s.hub.running["trainer"]
		s.hub.mu.Unlock()
		if ok && r == epoch {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.t.Fatalf("the supervisor does not report running epoch %d", epoch)
}

func (s *supervised) exitCode() int {
	s.t.Helper()
	select {
	case <-s.done:
		return s.code
	case <-time.After(10 * time.Second):
		s.t.Fatal("the supervisor did not exit")
		return 0
	}
}

func (s *supervised) stillRunning() {
	s.t.Helper()
	select {
	case <-s.done:
		s.t.Fatalf("the supervisor exited with %d; it should run on", s.code)
	default:
	}
}

func TestSupervisorRestartsTheWorkerPerEpoch(t *testing.T) {
	s := startSupervised(t, "NotIn:0,42", 5*time.Second)
	s.hub.setState(1, false)
	s.waitRunning(0)
	if got := s.log(); len(got) != 0 {
		t.Fatalf("the worker started behind the barrier: %q", got)
	}
	s.hub.setState(1, true)
	s.waitLog("start 1")
	s.waitRunning(1)

	// A new epoch: the worker is stopped, and waitStopped says so.
	s.hub.setState(2, false)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if stuck, unknown := s.hub.waitStopped(ctx, time.Second); len(stuck)+len(unknown) > 0 {
		t.Fatalf("waitStopped gave up on %v %v", stuck, unknown)
	}
	s.waitLog("start 1", "term")
	// What the worker left in its process group went with it.
	child, err := os.ReadFile(filepath.Join(s.dir, "child"))
	if err != nil {
		t.Fatal(err)
	}
	// Gone once killed and reaped (the supervisor is the orphans'
	// subreaper), which follows the stop within moments.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat("/proc/" + strings.TrimSpace(string(child))); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's child %s outlived the worker's stop", strings.TrimSpace(string(child)))
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.hub.setState(2, true)
	s.waitLog("start 1", "term", "start 2")

	// An exit that restarts in place is reported, and the worker waits
	// for the next epoch: a lifted barrier of the same epoch starts it
	// no more.
	s.write("exit", "3")
	select {
	case <-s.hub.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the exit was not reported")
	}
	if got := s.hub.takeExits(); !slices.Equal(got, []protocol.WorkerExit{{Epoch: 2, Container: "trainer", Code: 3}}) {
		t.Fatalf("exits %v", got)
	}
	s.waitRunning(0)
	s.stillRunning()
	s.hub.setState(3, false)
	s.hub.setState(3, true)
	s.waitLog("start 1", "term", "start 2", "start 3")

	// A code the podFailurePolicy decides ends the container with it.
	s.write("exit", "42")
	if code := s.exitCode(); code != 42 {
		t.Fatalf("exit code %d, want 42", code)
	}
}

func TestSupervisorEndsWithTheWorkersSuccess(t *testing.T) {
	s := startSupervised(t, "NotIn:0", 5*time.Second)
	s.hub.setState(1, true)
	s.waitLog("start 1")
	s.write("exit", "0")
	if code := s.exitCode(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
}

func TestSupervisorKillsAStubbornWorkerAfterTheGracePeriod(t *testing.T) {
	s := startSupervised(t, "NotIn:0", 300*time.Millisecond)
	s.hub.setState(1, true)
	s.waitLog("start 1")
	s.write("stubborn", "")
	start := time.Now()
	s.hub.setState(2, false)
	s.waitRunning(0)
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("the worker was stopped after %s, before its grace period", took)
	}
	s.waitLog("start 1", "ignored")
}

func TestSupervisorForwardsSIGTERM(t *testing.T) {
	s := startSupervised(t, "NotIn:0", 5*time.Second)
	s.hub.setState(1, true)
	s.waitLog("start 1")
	s.waitRunning(1)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.exitCode(); code != 0 {
		t.Fatalf("exit code %d, want the worker's 0", code)
	}
	s.waitLog("start 1", "term")
}

// An agent that has not chosen its epoch (it restarted alone, and has not
// read its broadcast yet) tells its supervisors nothing: a running worker
// runs on, and no worker starts.
func TestSupervisorWaitsForTheAgentsEpoch(t *testing.T) {
	s := startSupervised(t, "NotIn:0", time.Second)
	// The supervisor asks, and is held: the hub has no epoch yet.
	s.waitHeard()
	if got := s.log(); len(got) != 0 {
		t.Fatalf("the worker started before the agent chose an epoch: %q", got)
	}
	s.hub.setState(1, true)
	s.waitLog("start 1")
}

func TestProcessHubStart(t *testing.T) {
	h := newProcessHub([]string{"a"})
	if h.start("a", 0, 1) {
		t.Error("a start was granted before the agent chose an epoch")
	}
	if h.exit(protocol.WorkerExit{Epoch: 1, Container: "a", Code: 1}) {
		t.Error("an exit was taken before the agent chose an epoch")
	}
	h.setState(4, false)
	if h.start("a", 4, 1) {
		t.Error("a start was granted behind the barrier")
	}
	h.setState(4, true)
	if h.start("a", 3, 1) {
		t.Error("a start at an older epoch was granted")
	}
	if !h.start("a", 4, 2) {
		t.Error("a start behind a lifted barrier was refused")
	}
	// A report sent before the start was granted, arriving after it, is
	// stale: it must not make the agent think the worker stopped.
	h.heard("a", 0, 1, 0)
	h.setState(5, false)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if waiting, _ := h.waitStopped(ctx, 0); !slices.Equal(waiting, []string{"a"}) {
		t.Errorf("waitStopped with a worker of epoch 4 running: %v", waiting)
	}
	h.heard("a", 0, 3, 0)
	if waiting, _ := h.waitStopped(t.Context(), 0); len(waiting) != 0 {
		t.Errorf("waitStopped after the worker stopped: %v", waiting)
	}
}

func TestSupervisorEndpointsServeThePodAlone(t *testing.T) {
	h := newProcessHub([]string{"a"})
	h.setState(1, true)
	mux := http.NewServeMux()
	h.serveSupervisors(mux)
	for _, tc := range []struct {
		remote, query string
		want          int
	}{
		{"127.0.0.1:5000", "container=a&epoch=1&gen=1", http.StatusOK},
		{"[::1]:5000", "container=a&epoch=1&gen=2", http.StatusOK},
		{"10.244.0.7:5000", "container=a&epoch=1&gen=3", http.StatusForbidden},
		{"127.0.0.1:5000", "container=b&epoch=1&gen=4", http.StatusNotFound},
	} {
		req := httptest.NewRequest(http.MethodPost, protocol.SupervisorStartPath+"?"+tc.query, nil)
		req.RemoteAddr = tc.remote
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("start from %s with %s: %d, want %d", tc.remote, tc.query, rec.Code, tc.want)
		}
	}
	req := httptest.NewRequest(http.MethodPost, protocol.SupervisorExitPath+"?container=a&epoch=1&code=300", nil)
	req.RemoteAddr = "127.0.0.1:5000"
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Errorf("an exit code of 300: %d, want 400", rec.Code)
	}
}

// Under ordered barriers the supervisor runs the readiness probe against
// each worker it starts and reports its passing at that epoch only.
func TestSupervisorReportsReadinessPerEpoch(t *testing.T) {
	s := startSupervisedProbed(t, "NotIn:0", 5*time.Second, &protocol.ReadinessProbe{
		// Ready once the worker of this epoch has logged its start and the
		// file "ready" exists.
		Exec: []string{"sh", "-c", `test -e "$DIR/ready" && grep -q "start $(cat "$DIR/ready")" "$DIR/log"`}, PeriodSeconds: 1, TimeoutSeconds: 10,
	})
	readyAt := func() int32 {
		s.hub.mu.Lock()
		defer s.hub.mu.Unlock()
		return s.hub.readyAt["trainer"]
	}
	s.hub.setState(1, true)
	s.waitLog("start 1")
	s.write("ready", "1")
	select {
	case <-s.hub.readied:
	case <-time.After(time.Minute):
		t.Fatal("readiness at epoch 1 not reported")
	}
	if got := s.hub.readyEpoch(); got != 1 {
		t.Fatalf("readyEpoch %d, want 1", got)
	}
	s.hub.setState(2, false)
	s.waitRunning(0)
	if got := s.hub.readyEpoch(); got != 0 {
		t.Fatalf("readyEpoch %d after a new epoch, want 0", got)
	}
	s.hub.setState(2, true)
	s.waitLog("start 1", "term", "start 2")
	s.write("ready", "2")
	select {
	case <-s.hub.readied:
	case <-time.After(time.Minute):
		t.Fatalf("readiness at epoch 2 not reported (ready at %d)", readyAt())
	}
	if got := s.hub.readyEpoch(); got != 2 {
		t.Fatalf("readyEpoch %d, want 2", got)
	}
}

// A supervisor that does not report its worker stopped within the grace
// period it gives it (and stoppedWait more) is stuck: the new epoch goes
// on without it rather than hold the group until the in-place timeout.
func TestWaitStoppedGivesUpOnAStuckSupervisor(t *testing.T) {
	defer func(d time.Duration) { stoppedWait = d }(stoppedWait)
	stoppedWait = 50 * time.Millisecond
	h := newProcessHub([]string{"a"})
	h.setState(1, true)
	h.heard("a", 0, 0, 100*time.Millisecond)
	if !h.start("a", 1, 1) {
		t.Fatal("start refused")
	}
	h.setState(2, false)
	start := time.Now()
	stuck, _ := h.waitStopped(t.Context(), 0)
	if !slices.Equal(stuck, []string{"a"}) {
		t.Fatalf("stuck %v, want [a]", stuck)
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("gave up after %v, before the grace period and stoppedWait (150ms)", took)
	}
}
