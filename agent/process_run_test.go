package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/utils/ptr"

	"github.com/inplace-dev/inplace/api/protocol"
)

// processTransport is a Pod as the API server keeps it, in process scope,
// fed broadcasts by the test.
type processTransport struct {
	updates chan protocol.Broadcast

	mu       sync.Mutex
	epochs   []int32
	restarts []int32
	exits    []protocol.WorkerExit
	readies  []int32
	changed  chan struct{}
}

func (p *processTransport) Broadcasts(context.Context) (<-chan protocol.Broadcast, error) {
	return p.updates, nil
}

func (p *processTransport) ReportEpoch(ctx context.Context, epoch int32) error {
	return p.ReportProcessEpoch(ctx, epoch, -1)
}

func (p *processTransport) ReportProcessEpoch(_ context.Context, epoch, restarts int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epochs, p.restarts = append(p.epochs, epoch), append(p.restarts, restarts)
	p.signal()
	return nil
}

func (p *processTransport) ReportWorkerExit(_ context.Context, e protocol.WorkerExit) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exits = append(p.exits, e)
	p.signal()
	return nil
}

func (p *processTransport) ReportReady(_ context.Context, epoch int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.readies = append(p.readies, epoch)
	p.signal()
	return nil
}

func (p *processTransport) Self(context.Context) (int32, Workers, error) {
	return 0, WorkersStopped, nil
}

func (p *processTransport) signal() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// newProcessAgent is an agent's configuration in process scope, supervising
// "trainer" and listening on a free loopback port, with a fresh Pod that
// has had its first broadcast; supervisorBinary is the hook's copy to
// wait for ("" for none).
func newProcessAgent(t *testing.T, supervisorBinary string) (Config, *processTransport) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &processTransport{updates: make(chan protocol.Broadcast, 8), changed: make(chan struct{}, 1)}
	p.updates <- protocol.Broadcast{}
	return Config{ReplicatedJob: "workers", RestartExitCode: 88, Listener: l, PodEpoch: ptr.To[int32](0),
		Process: &ProcessConfig{Supervised: []string{"trainer"}, SupervisorBinary: supervisorBinary}}, p
}

// waitFor waits until cond holds of what the Pod was told.
func (p *processTransport) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		p.mu.Lock()
		ok := cond()
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-p.changed:
		case <-time.After(10 * time.Millisecond):
		case <-timeout:
			t.Fatalf("waiting for %s: epochs %v restarts %v exits %v", what, p.epochs, p.restarts, p.exits)
		}
	}
}

// A fake supervisor of container "trainer", speaking the agent's HTTP
// endpoints as the real one does.
type fakeSupervisor struct {
	t    *testing.T
	base string
	gen  uint64
}

func (s *fakeSupervisor) call(method, path string, q url.Values) (*http.Response, error) {
	q.Set("container", "trainer")
	q.Set("gen", fmt.Sprint(s.gen))
	req, err := http.NewRequest(method, s.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}

// state reports what runs and returns the agent's state once it differs
// from after.
func (s *fakeSupervisor) state(running int32, after uint64) protocol.SupervisorState {
	s.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		resp, err := s.call(http.MethodGet, protocol.SupervisorStatePath, url.Values{"running": {fmt.Sprint(running)}, "after": {fmt.Sprint(after)}})
		if err != nil { // the agent is not listening yet
			time.Sleep(10 * time.Millisecond)
			continue
		}
		var st protocol.SupervisorState
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			return st
		}
	}
	s.t.Fatal("no state from the agent")
	return protocol.SupervisorState{}
}

// lifted asks for the agent's state, from st on, until its barrier is
// lifted, and fails the test if it is not within 30 s.
func (s *fakeSupervisor) lifted(st protocol.SupervisorState) protocol.SupervisorState {
	s.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !st.Lifted; st = s.state(0, st.Version) {
		if time.Now().After(deadline) {
			s.t.Fatalf("state %+v: the barrier was not lifted within 30s", st)
		}
	}
	return st
}

func (s *fakeSupervisor) post(path string, q url.Values) int {
	s.t.Helper()
	resp, err := s.call(http.MethodPost, path, q)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestRunRestartsTheWorkersInProcessScope drives an agent in process
// scope through a start, a worker's exit and the restart it causes: the
// agent never exits, reports the new epoch only once its supervisor has
// stopped the worker, and counts the restart.
func TestRunRestartsTheWorkersInProcessScope(t *testing.T) {
	cfg, p := newProcessAgent(t, "")
	l := cfg.Listener
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() {
		code, _ := Run(ctx, testr.New(t), cfg, p)
		done <- code
	}()
	s := &fakeSupervisor{t: t, base: "http://" + l.Addr().String()}

	st := s.state(0, 0)
	if st.Epoch != 1 || st.Lifted {
		t.Fatalf("first state %+v, want epoch 1 held", st)
	}
	p.waitFor(t, "epoch 1 reported", func() bool { return len(p.epochs) == 1 && p.epochs[0] == 1 && p.restarts[0] == 0 })
	p.updates <- protocol.Broadcast{SyncedEpoch: 1}
	if st = s.state(0, st.Version); st.Epoch != 1 || !st.Lifted {
		t.Fatalf("state after the sync %+v, want epoch 1 lifted", st)
	}
	s.gen++
	if code := s.post(protocol.SupervisorStartPath, url.Values{"epoch": {"1"}}); code != http.StatusOK {
		t.Fatalf("start at epoch 1: %d", code)
	}

	// The worker exits with a code that restarts in place: reported.
	s.gen++
	if code := s.post(protocol.SupervisorExitPath, url.Values{"epoch": {"1"}, "code": {"3"}}); code != http.StatusOK {
		t.Fatalf("exit: %d", code)
	}
	p.waitFor(t, "the exit reported", func() bool {
		return len(p.exits) == 1 && p.exits[0] == protocol.WorkerExit{Epoch: 1, Container: "trainer", Code: 3}
	})

	// The controller deprecates epoch 1: the agent moves to 2 and, the
	// worker already stopped, reports it with one worker restart counted.
	p.updates <- protocol.Broadcast{SyncedEpoch: 1, DeprecatedEpoch: 1}
	p.waitFor(t, "epoch 2 reported", func() bool { return len(p.epochs) == 2 && p.epochs[1] == 2 && p.restarts[1] == 1 })
	p.updates <- protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 1}
	if st = s.state(0, st.Version); st.Epoch != 2 {
		t.Fatalf("state %+v, want epoch 2", st)
	}
	st = s.lifted(st)
	s.gen++
	if code := s.post(protocol.SupervisorStartPath, url.Values{"epoch": {"2"}}); code != http.StatusOK {
		t.Fatalf("start at epoch 2: %d", code)
	}

	// Another Pod's worker fails: epoch 2 is deprecated while this Pod's
	// worker runs. The agent moves to 3 and tells the supervisor, but
	// reports 3 only once the supervisor says its worker has stopped.
	p.updates <- protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 2}
	if st = s.state(2, st.Version); st.Epoch != 3 || st.Lifted {
		t.Fatalf("state %+v, want epoch 3 held", st)
	}
	p.mu.Lock()
	reported := len(p.epochs)
	p.mu.Unlock()
	if reported != 2 {
		t.Fatalf("epoch 3 reported while the worker of epoch 2 ran: epochs %v", p.epochs)
	}
	s.gen++
	s.state(0, 0) // the worker has stopped
	p.waitFor(t, "epoch 3 reported", func() bool { return len(p.epochs) == 3 && p.epochs[2] == 3 && p.restarts[2] == 2 })
	select {
	case code := <-done:
		t.Fatalf("the agent exited with %d in process scope", code)
	default:
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit code %d when stopped, want 0", code)
	}
}

// TestRunReportsTheWorkersReady: in process scope the agent writes on its
// Pod the epoch at which every supervised worker passed its readiness
// probe, which ordered barriers wait for.
func TestRunReportsTheWorkersReady(t *testing.T) {
	cfg, p := newProcessAgent(t, "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _, _ = Run(ctx, testr.New(t), cfg, p) }()
	s := &fakeSupervisor{t: t, base: "http://" + cfg.Listener.Addr().String()}

	st := s.state(0, 0)
	p.waitFor(t, "epoch 1 reported", func() bool { return len(p.epochs) == 1 && p.epochs[0] == 1 })
	p.updates <- protocol.Broadcast{SyncedEpoch: 1}
	s.lifted(st)
	s.gen++
	if code := s.post(protocol.SupervisorStartPath, url.Values{"epoch": {"1"}}); code != http.StatusOK {
		t.Fatalf("start at epoch 1: %d", code)
	}
	if code := s.post(protocol.SupervisorReadyPath, url.Values{"epoch": {"1"}}); code != http.StatusOK {
		t.Fatalf("ready at epoch 1: %d", code)
	}
	p.waitFor(t, "ready at epoch 1 reported", func() bool { return len(p.readies) == 1 && p.readies[0] == 1 })
}

// TestRunReportsNoEpochBeforeTheSupervisorIsInstalled: in process scope
// the agent's first epoch waits for the postStart hook's copy of the
// supervisor, so that a failed hook cannot let the JobSet sync.
func TestRunReportsNoEpochBeforeTheSupervisorIsInstalled(t *testing.T) {
	binary := filepath.Join(t.TempDir(), "inplace-supervisor")
	cfg, p := newProcessAgent(t, binary)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _, _ = Run(ctx, testr.New(t), cfg, p) }()

	// Long enough for the agent to have reported, were it not waiting.
	select {
	case <-p.changed:
		p.mu.Lock()
		defer p.mu.Unlock()
		t.Fatalf("an epoch was reported before the supervisor's binary existed: %v", p.epochs)
	case <-time.After(300 * time.Millisecond):
	}
	if err := os.WriteFile(binary, []byte("#!"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "epoch 1 reported", func() bool { return len(p.epochs) == 1 && p.epochs[0] == 1 })
}

// TestRunGivesUpWaitingForTheSupervisor: a hook that never installed the
// supervisor ends the agent with an error, so that the kubelet starts its
// container, and the hook, again.
func TestRunGivesUpWaitingForTheSupervisor(t *testing.T) {
	defer func(d time.Duration) { installWait = d }(installWait)
	installWait = 100 * time.Millisecond
	cfg, p := newProcessAgent(t, filepath.Join(t.TempDir(), "inplace-supervisor"))
	code, err := Run(t.Context(), testr.New(t), cfg, p)
	if code == 0 || err == nil {
		t.Fatalf("Run returned %d, %v; want a non-zero code and an error", code, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.epochs) != 0 {
		t.Errorf("epochs reported: %v", p.epochs)
	}
}
