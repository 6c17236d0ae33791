package supervisor

import (
	"syscall"
	"time"

	"github.com/inplace-dev/inplace/api/protocol"
)

// In in-process scope the worker that fails starts again as a new process,
// and its start (an interpreter, a framework's imports, the data loaded)
// is most of the restart. The standby is that start done ahead: a second
// process of the worker's command, started once the worker has connected
// to the control socket, which runs the command up to its own connection
// and waits there. When the worker exits to be restarted, the standby
// takes its place behind the next barrier, and a new standby starts
// later. A standby costs the memory of a worker that has done its
// imports; it is told nothing until it takes the worker's place, and the
// worker protocol has it wait for "start".

// standbyDelay is how long after a worker has connected its standby
// starts: not beside a worker that is forming its process group and
// loading its checkpoint.
const standbyDelay = 3 * time.Second

type standby struct {
	pid   int
	conns map[*controlConn]bool
}

// scheduleStandby starts a standby after standbyDelay, if the worker is to
// have one and has none.
func (s *supervisor) scheduleStandby() {
	// Not at epoch 0, where in-place restarts are off.
	if !s.cfg.Standby || s.osProcs == nil || s.standby != nil || s.terminating || s.w == nil || s.w.epoch == 0 {
		return
	}
	s.standbyTimer = time.NewTimer(standbyDelay)
}

// startStandby starts the standby, unless the worker no longer wants one.
func (s *supervisor) startStandby() {
	if s.standby != nil || s.terminating || s.w == nil || s.w.stopping || s.w.parking || s.w.parked {
		return // a worker that is leaving its epoch schedules none
	}
	pid, err := s.osProcs.startStandby()
	if err != nil {
		s.logf("starting the standby: %v", err)
		return
	}
	s.standby = &standby{pid: pid, conns: map[*controlConn]bool{}}
	s.logf("started the standby (pid %d)", pid)
}

// standbyExited takes the exit of a standby that never took the worker's
// place. It is not started again before the worker is: a command that
// fails as it starts would otherwise start for ever.
func (s *supervisor) standbyExited(code int) {
	s.logf("the standby (pid %d) exited with code %d before it was needed", s.standby.pid, code)
	s.dropStandby() // what it left of its process group goes with it
}

// dropStandby ends the standby and what it started.
func (s *supervisor) dropStandby() {
	if s.standby == nil {
		return
	}
	s.procs.Signal(s.standby.pid, syscall.SIGKILL)
	for cc := range s.standby.conns {
		_ = cc.conn.Close()
	}
	s.standby = nil
}

// startStandby forks the standby in a process group of its own, with the
// worker's environment and EnvWorkerStandby, and no epoch: it learns its
// epoch from "start".
func (o *osProcesses) startStandby() (int, error) {
	return o.fork(append([]string{protocol.EnvWorkerStandby + "=1"}, o.env...))
}
