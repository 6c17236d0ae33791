package agent

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inplace-dev/inplace/api/protocol"
)

// The supervisor in in-process scope, with python/inplace_restart.py as
// its worker (testdata/inprocess_worker.py: the module's run() around a train()
// that logs, torch.distributed stood in for).

// startInProcess starts a supervisor in in-process scope with the Python
// worker, whose parking deadline is park.
func startInProcess(t *testing.T, park time.Duration) *supervised {
	t.Helper()
	return startInProcessSpec(t, supervisorSpec{ParkDeadline: park})
}

// startInProcessSpec is startInProcess with more of the supervisor's settings.
func startInProcessSpec(t *testing.T, spec supervisorSpec) *supervised {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3, which runs the worker module's tests: %v", err)
	}
	module, err := filepath.Abs("../python")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", module)
	t.Setenv("PYTHONDONTWRITEBYTECODE", "1")
	spec.Restart = cmp.Or(spec.Restart, "NotIn:0")
	spec.Grace = cmp.Or(spec.Grace, 2*time.Second)
	spec.Command = []string{python, "testdata/inprocess_worker.py"}
	return startSupervisedSpec(t, spec)
}

// pidAt is the pid the worker logged starting epoch at.
func (s *supervised) pidAt(epoch string) string {
	s.t.Helper()
	for _, l := range s.log() {
		if rest, ok := strings.CutPrefix(l, "start "+epoch+" "); ok {
			return rest
		}
	}
	s.t.Fatalf("the worker did not start epoch %s: %q", epoch, s.log())
	return ""
}

// waitLogged waits until the worker's log holds want, in order among its
// lines.
func (s *supervised) waitLogged(want ...string) {
	s.t.Helper()
	deadline := time.Now().Add(supervisedWait)
	for time.Now().Before(deadline) {
		got, i := s.log(), 0
		for _, l := range got {
			if i < len(want) && strings.HasPrefix(l, want[i]) {
				i++
			}
		}
		if i == len(want) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("worker log %q, want lines starting %q in order", s.log(), want)
}

func TestSupervisorParksAndResumesTheWorkerInItsProcess(t *testing.T) {
	s := startInProcess(t, time.Minute)
	s.hub.setState(1, true)
	s.waitLogged("init inplace/1/", "start 1 ")
	s.waitRunning(1)
	pid := s.pidAt("1")

	// A new epoch: the worker leaves train(), tears its group down and
	// parks, long before its deadline; the agent counts it stopped.
	start := time.Now()
	s.hub.setState(2, false)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if stuck, unknown := s.hub.waitStopped(ctx, time.Second); len(stuck)+len(unknown) > 0 {
		t.Fatalf("waitStopped gave up on %v %v", stuck, unknown)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the worker parked after %s", took)
	}
	s.waitLogged("start 1 ", "over 1", "destroy")
	if got := s.log(); strings.HasPrefix(got[len(got)-1], "init") {
		t.Fatalf("the worker formed a group before the barrier lifted: %q", got)
	}

	// The barrier lifts: the same process forms the group at epoch 2.
	s.hub.setState(2, true)
	s.waitLogged("start 1 ", "over 1", "destroy", "init inplace/2/", "start 2 ")
	s.waitRunning(2)
	if again := s.pidAt("2"); again != pid {
		t.Fatalf("epoch 2 ran in pid %s, epoch 1 in %s: not in the same process", again, pid)
	}

	// train() returning ends run(), and the container with code 0.
	s.write("done", "")
	if code := s.exitCode(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	s.waitLogged("start 2 ", "destroy", "returned done")
}

func TestSupervisorRestartsAWorkerThatDoesNotPark(t *testing.T) {
	const park = 500 * time.Millisecond
	s := startInProcess(t, park)
	// Read as train() begins: it will not hear that its epoch is over.
	s.write("stubborn", "")
	s.hub.setState(1, true)
	s.waitLogged("start 1 ")
	s.waitRunning(1)
	pid := s.pidAt("1")
	start := time.Now()
	s.hub.setState(2, false)
	s.waitRunning(0)
	if took := time.Since(start); took < park {
		t.Fatalf("the worker was stopped after %s, within its deadline to park", took)
	}
	if err := os.Remove(filepath.Join(s.dir, "stubborn")); err != nil {
		t.Fatal(err)
	}
	s.hub.setState(2, true)
	s.waitLogged("start 1 ", "start 2 ")
	if again := s.pidAt("2"); again == pid {
		t.Fatalf("epoch 2 ran in pid %s, as epoch 1: the worker that did not park was not restarted", pid)
	}
}

// waitGone waits until the process pid has exited and been reaped.
func (s *supervised) waitGone(pid string) {
	s.t.Helper()
	deadline := time.Now().Add(supervisedWait)
	for {
		if _, err := os.Stat("/proc/" + pid); err != nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("process %s did not exit", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// failAndLift has the worker exit with a code that restarts in place,
// waits for the exit to reach the agent, and lifts the barrier of epoch,
// as the controller would.
func (s *supervised) failAndLift(epoch int32) {
	s.t.Helper()
	s.write("exit", "3")
	s.waitReported()
	s.waitRunning(0)
	s.hub.setState(epoch, false)
	s.hub.setState(epoch, true)
}

func TestSupervisorRestartsAWorkerThatFailed(t *testing.T) {
	s := startInProcess(t, time.Minute)
	s.hub.setState(1, true)
	s.waitLogged("start 1 ")
	pid := s.pidAt("1")
	// Its own failure: an exit, reported; a new process at the next epoch.
	s.failAndLift(2)
	s.waitLogged("start 1 ", "start 2 ")
	if again := s.pidAt("2"); again == pid {
		t.Fatalf("epoch 2 ran in the pid of the worker that exited, %s", pid)
	}
}

// A worker that says it fails (the module does when train raises) has its
// restart begin while its process ends: the agent hears of the failure
// before the exit, once, and the next process of the rank (here its
// standby, which would take the place at once) runs only once the failing
// one has ended.
func TestSupervisorRestartsAFailingWorkerBeforeItsProcessEnds(t *testing.T) {
	s := startInProcessSpec(t, supervisorSpec{ParkDeadline: time.Minute, Grace: time.Minute, Standby: true})
	s.hub.setState(1, true)
	s.waitLogged("start 1 ", "standby ")
	pid := s.pidAt("1")
	s.write("hold-exit", "")
	s.failAndLift(2)
	if _, err := os.Stat("/proc/" + pid); err != nil {
		t.Fatalf("the failure reached the agent only once the process had ended")
	}
	// Its process group's connections are shut down before its exit:
	// its peers' collectives fail at once.
	s.waitLogged("start 1 ", "standby ", "group connection closed "+pid)
	// The supervisor has seen the barrier of epoch 2 lifted while the
	// failing process is still there.
	s.waitTaken()
	s.write("let-go", "")
	s.waitLogged("start 1 ", "standby ", "group connection closed "+pid, "ended "+pid, "start 2 ")
	if got := s.hub.takeExits(); !slices.Equal(got, []protocol.WorkerExit{{Epoch: 1, Container: "trainer", Code: 3}}) {
		t.Errorf("exits reported %v, want the failure once, with the code the worker said", got)
	}
}

// A worker that said it fails with a code that restarts in place, then
// exits with one the Job's podFailurePolicy decides, ends its container
// with that code; a code that does not restart in place said beforehand
// changes nothing: the exit is judged when it comes.
func TestSupervisorJudgesAFailingWorkerByTheCodeItExitsWith(t *testing.T) {
	s := startInProcessSpec(t, supervisorSpec{ParkDeadline: time.Minute, Restart: "NotIn:0,42"})
	s.hub.setState(1, true)
	s.waitLogged("start 1 ")
	s.write("hold-exit", "")
	s.write("exit", "3")
	s.waitReported()
	s.write("exit-now", "42")
	if code := s.exitCode(); code != 42 {
		t.Errorf("the container exited with %d, want 42, the code the worker exited with", code)
	}

	s = startInProcessSpec(t, supervisorSpec{ParkDeadline: time.Minute, Restart: "NotIn:0,42"})
	s.hub.setState(1, true)
	s.waitLogged("start 1 ")
	s.write("exit", "42")
	if code := s.exitCode(); code != 42 {
		t.Errorf("the container exited with %d, want 42", code)
	}
}

// A failing worker that does not end within the grace period gets SIGKILL,
// and the signal's code is not judged: the restart was asked for. (Only
// code 3 restarts in place here: 137 would end the container.)
func TestSupervisorKillsAFailingWorkerThatDoesNotEnd(t *testing.T) {
	s := startInProcessSpec(t, supervisorSpec{ParkDeadline: time.Minute, Restart: "In:3"})
	s.hub.setState(1, true)
	s.waitLogged("start 1 ")
	pid := s.pidAt("1")
	s.write("hold-exit", "")
	s.failAndLift(2)
	s.waitGone(pid)
	s.waitLogged("start 1 ", "start 2 ")
	s.stillRunning()
}

// A failing worker that exits with 0 after saying it fails restarts: the
// restart was asked for, and has begun.
func TestSupervisorRestartsAFailingWorkerThatExitsWithZero(t *testing.T) {
	s := startInProcessSpec(t, supervisorSpec{ParkDeadline: time.Minute, Grace: time.Minute})
	s.hub.setState(1, true)
	s.waitLogged("start 1 ")
	s.write("hold-exit", "")
	s.failAndLift(2)
	s.write("exit-now", "0")
	s.waitLogged("start 1 ", "start 2 ")
	s.stillRunning()
}

// exit_code is the code Python exits with, for the exceptions that end a
// process with one that is not 0; None for the others.
func TestInplaceRestartExitCodes(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3, which runs the worker module's tests: %v", err)
	}
	const check = `
import sys, inplace_restart as m
cases = [(SystemExit(), None), (SystemExit(0), None), (SystemExit(1), 1), (SystemExit(256), None),
         (SystemExit(-1), 255), (SystemExit("why"), 1), (SystemExit(2**40 + 3), 3), (SystemExit(2**63), 255),
         (ValueError(), 1), (RuntimeError(), 1), (KeyboardInterrupt(), None)]
bad = [(repr(e), m.exit_code(e), want) for e, want in cases if m.exit_code(e) != want]
sys.exit(repr(bad) if bad else 0)
`
	cmd := exec.Command(python, "-c", check)
	cmd.Env = append(os.Environ(), "PYTHONPATH=../python", "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("exit_code (exception, got, want): %s (%v)", out, err)
	}
}

func TestSupervisorReplacesAFailedWorkerWithItsStandby(t *testing.T) {
	s := startInProcessSpec(t, supervisorSpec{ParkDeadline: time.Minute, Standby: true})
	s.hub.setState(1, true)
	s.waitLogged("start 1 ")
	pid := s.pidAt("1")
	// Started once the worker has connected, the standby runs the
	// command up to run(), and waits.
	s.waitLogged("start 1 ", "standby ")
	var standby string
	for _, l := range s.log() {
		if rest, ok := strings.CutPrefix(l, "standby "); ok {
			standby = rest
		}
	}
	if standby == pid {
		t.Fatalf("the standby is the worker, pid %s", pid)
	}
	s.failAndLift(2)
	s.waitLogged("start 1 ", "standby ", "start 2 ")
	if got := s.pidAt("2"); got != standby {
		t.Fatalf("epoch 2 ran in pid %s, not in the standby %s", got, standby)
	}
	// The former standby, now the worker, gets a standby of its own.
	s.waitLogged("start 1 ", "standby ", "start 2 ", "standby ")
	starts := 0
	for _, l := range s.log() {
		if strings.HasPrefix(l, "start 1 ") {
			starts++
		}
	}
	if starts != 1 {
		t.Fatalf("%d processes ran at epoch 1, want 1: %q", starts, s.log())
	}
}

// A parked worker that exits on its own is judged by its code: one that
// restarts in place starts a new process behind the next barrier, one the
// Job's podFailurePolicy decides ends the container with it.
func TestSupervisorJudgesTheExitOfAParkedWorker(t *testing.T) {
	s := startInProcessSpec(t, supervisorSpec{ParkDeadline: time.Minute, Restart: "NotIn:0,42"})
	s.hub.setState(1, true)
	s.waitLogged("start 1 ")
	pid := s.pidAt("1")
	s.hub.setState(2, false)
	s.waitLogged("start 1 ", "over 1", "destroy")
	s.waitRunning(0)
	s.write("exit-now", "3")
	s.waitGone(pid)
	s.hub.setState(2, true)
	s.waitLogged("start 1 ", "over 1", "destroy", "start 2 ")
	if again := s.pidAt("2"); again == pid {
		t.Fatalf("epoch 2 ran in pid %s, the worker that exited while parked", pid)
	}
	if got := s.hub.takeExits(); len(got) != 0 {
		t.Errorf("exits reported %v: the worker exited at an epoch already over", got)
	}
	s.hub.setState(3, false)
	s.waitLogged("start 2 ", "over 2", "destroy")
	s.waitRunning(0)
	s.write("exit-now", "42")
	if code := s.exitCode(); code != 42 {
		t.Fatalf("exit code %d, want the parked worker's 42", code)
	}
}

// At epoch 0 in-place restarts are off: the worker runs once, as with no
// supervisor, and run() forms its group from the environment.
func TestSupervisorRunsTheWorkerWithoutTheProtocolAtEpochZero(t *testing.T) {
	s := startInProcess(t, time.Minute)
	s.hub.setState(0, true)
	s.waitLogged("init None", "start 0 ")
	s.write("done", "")
	if code := s.exitCode(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
}

// A worker that never connects cannot be asked to park: it is stopped at
// once, not after its deadline.
func TestSupervisorStopsAWorkerWithNoConnectionAtOnce(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal(err)
	}
	s := startSupervisedSpec(t, supervisorSpec{Restart: "NotIn:0", Grace: 2 * time.Second, ParkDeadline: 10 * time.Minute,
		Command: []string{python, "-c", "import time; time.sleep(600)"}})
	s.hub.setState(1, true)
	s.waitRunning(1)
	start := time.Now()
	s.hub.setState(2, false)
	s.waitRunning(0)
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("the worker was stopped after %s: it waited for its deadline to park", took)
	}
}

func TestControlSocketServesTheWorkerAlone(t *testing.T) {
	name := "@inplace-test/" + t.Name() + "/" + time.Now().Format("150405.000000000")
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal(err)
	}
	s := startSupervisedSpec(t, supervisorSpec{Restart: "NotIn:0", Grace: time.Second, ParkDeadline: time.Minute, Control: name,
		Command: []string{python, "-c", "import time; time.sleep(600)"}})
	s.hub.setState(1, true)
	s.waitRunning(1)
	// The test is not a descendant of the supervisor: it is hung up on
	// without a word.
	conn, err := net.Dial("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(supervisedWait))
	buf := make([]byte, 64)
	if n, err := conn.Read(buf); !errors.Is(err, io.EOF) {
		t.Fatalf("the control socket answered a stranger %q, %v; want it hung up", buf[:n], err)
	}
}
