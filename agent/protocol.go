package agent

import "github.com/inplace-dev/inplace/api/protocol"

// Decision is what the agent must do after a step.
type Decision struct {
	// ReportEpoch, if non-zero, is written to the Pod's epoch annotation.
	ReportEpoch int32
	// LiftBarrier opens /barrier-is-lifted.
	LiftBarrier bool
	// Restart makes the agent exit with the restart exit code.
	Restart bool
}

// Machine is the agent's state.
type Machine struct {
	replicatedJob string
	// last is the latest broadcast the machine was given: a start again
	// (StartFromPod, RestartWorkers) is a start on it.
	last       protocol.Broadcast
	epoch      int32
	lifted     bool
	restarting bool
}

// NewMachine returns the state machine of an agent in a Pod of the named
// replicated job.
func NewMachine(replicatedJob string) *Machine { return &Machine{replicatedJob: replicatedJob} }

// Epoch is the agent's epoch, 0 before Start.
func (m *Machine) Epoch() int32 { return m.epoch }

// Lifted reports whether the barrier is lifted.
func (m *Machine) Lifted() bool { return m.lifted }

// Workers is what an agent that starts finds of its Pod's workers.
type Workers int

const (
	// WorkersStopped: a worker ran since the agent's previous run started
	// and does not run now (it exited, or the whole Pod was restarted in
	// place), or the agent has no previous run: the epoch the Pod carries
	// is over for this Pod.
	WorkersStopped Workers = iota
	// WorkersRunning: every worker runs; only the agent restarted.
	WorkersRunning
	// WorkersWaiting: no worker has run since the agent's previous run
	// started: the agent restarted alone before its workers started, behind
	// a barrier it had not lifted yet.
	WorkersWaiting
)

// Start chooses the epoch from the first broadcast. podEpoch is the epoch
// the Pod already carries (0 if none) and workers what its worker
// containers do: when only the agent restarted (they run, or they have not
// started since its previous run did) and that epoch is not deprecated, it
// resumes the epoch instead of forcing a group restart.
//
// Start forgets whatever the machine did before: every start is a first.
func (m *Machine) Start(b protocol.Broadcast, podEpoch int32, workers Workers) Decision {
	*m = Machine{replicatedJob: m.replicatedJob, last: b}
	if b.Disabled {
		return m.Observe(b)
	}
	if podEpoch > b.DeprecatedEpoch && workers != WorkersStopped {
		m.epoch = podEpoch
		d := m.Observe(b)
		if podEpoch == b.SyncedEpoch && workers == WorkersRunning {
			// The workers already run behind a lifted barrier.
			m.lifted, d.LiftBarrier = true, true
		}
		return d
	}
	// Never below the epoch the Pod carries: the agents' admission policy
	// refuses a lower one. It is higher only when this broadcast is older
	// than one an earlier run of the agent saw (a watch served by an API
	// server behind the one that took its report); a newer broadcast
	// deprecates it, and the agent restarts.
	m.epoch = max(b.SyncedEpoch+1, podEpoch)
	d := m.Observe(b)
	d.ReportEpoch = m.epoch
	return d
}

// NeedsPod reports whether Start needs to read the agent's Pod, given the
// first broadcast and the epoch the Pod carried when the kubelet started
// the agent (envEpoch, from the Downward API; nil when the agent's
// environment does not say).
//
// The Pod's state matters to Start only when its epoch is above the
// deprecated one: then the agent may have restarted alone, its workers
// still running, and resumes if they are. At or below it, the agent starts
// a new epoch whatever its workers do, and that is the case of every agent
// of a group restarted in place: it exited because its epoch was
// deprecated, or its Pod's containers were all restarted with it. So the
// agents of an in-place restart send no read; one that crashed alone
// reads its Pod, and so does the agent of the Pod whose worker failed if
// it starts before the controller deprecated the epoch.
//
// The kubelet's copy of the Pod, from which it sets the variable, may be
// behind the API server's, never ahead (an agent's epoch only rises), so
// envEpoch is a lower bound of the Pod's epoch. An agent given an epoch
// older than its Pod's either reports one below it, which the agents'
// admission policy refuses and which makes it read its Pod (see Run), or
// starts a new epoch where it could have resumed: one needless group
// restart, in the moment after a report that the kubelet has not seen yet.
func NeedsPod(b protocol.Broadcast, envEpoch *int32) bool {
	if b.Disabled {
		// Start chooses no epoch: the workers run, whatever the Pod says.
		return false
	}
	return envEpoch == nil || *envEpoch > b.DeprecatedEpoch
}

// StartFromPod starts the machine again, on the latest broadcast, from
// the epoch its Pod carries and what its workers do: a report refused
// because the Pod carries a later epoch than the start was given (the
// kubelet's copy of the Pod was behind, and so was the broadcast) says
// the start was wrong. Nothing was lifted yet, since nothing is before
// the report.
func (m *Machine) StartFromPod(podEpoch int32, workers Workers) Decision {
	return m.Start(m.last, podEpoch, workers)
}

// RestartWorkers is the restart of process scope, where the agent does not
// exit at a deprecated epoch: its Pod's workers are stopped and started
// again instead, and the machine starts again, on the latest broadcast, as
// an agent whose workers have stopped at its epoch (a new epoch, reported
// once they have stopped).
func (m *Machine) RestartWorkers() Decision {
	return m.Start(m.last, m.epoch, WorkersStopped)
}

// Observe applies a newer broadcast.
func (m *Machine) Observe(b protocol.Broadcast) Decision {
	var d Decision
	m.last = b
	if m.restarting {
		return d
	}
	if b.Disabled {
		// In-place restarts are off: the workers run, and a Pod restarts
		// only as its own containers' rules say.
		if !m.lifted {
			m.lifted, d.LiftBarrier = true, true
		}
		return d
	}
	if m.epoch == 0 {
		// Started while in-place restarts were off: the workers already
		// run, and this Pod joins the protocol when it next starts.
		return d
	}
	if m.epoch <= b.DeprecatedEpoch {
		m.restarting = true
		d.Restart = true
		return d
	}
	if !m.lifted && m.epoch == b.SyncedEpoch && b.Open(m.replicatedJob) {
		m.lifted = true
		d.LiftBarrier = true
	}
	return d
}
