package simnode

import (
	"slices"
	"sync"
	"time"
)

// EventKind names a moment in a simulated Pod's life that tests and
// benchmarks time.
type EventKind string

const (
	// PodObserved: the Pod was first seen by the benchmark's watch (real
	// nodes only).
	PodObserved EventKind = "PodObserved"
	// AgentStarted: the agent container (re)started.
	AgentStarted EventKind = "AgentStarted"
	// EpochReported: the agent began writing its epoch on its Pod. Recorded
	// before the write, so anything that depends on the write comes later.
	EpochReported EventKind = "EpochReported"
	// EpochWritten: the agent's epoch write returned.
	EpochWritten EventKind = "EpochWritten"
	// BarrierLifted: the agent's startup probe passed.
	BarrierLifted EventKind = "BarrierLifted"
	// WorkersStarted: the main containers started. Recorded before the
	// status write that tells the API server.
	WorkersStarted EventKind = "WorkersStarted"
	// WorkerExited: a main container exited.
	WorkerExited EventKind = "WorkerExited"
	// WorkersStopped: the main containers were stopped by the node, with
	// the Pod's other containers for an in-place restart or with the Pod
	// for its deletion; recorded once they have stopped.
	WorkersStopped EventKind = "WorkersStopped"
	// WorkerStopping: a supervisor asked its worker to stop (SIGTERM to
	// its process group, process scope): the worker stops after
	// Latency.ProcessStop, whatever the API server does meanwhile.
	WorkerStopping EventKind = "WorkerStopping"
	// ExitWritten: the first status write that reports a main container
	// terminated with a non-zero code returned; ExitCode is that code.
	ExitWritten EventKind = "ExitWritten"
)

// Event is one recorded moment. Epoch is the epoch the Pod's agent last
// reported (0 before its first report).
type Event struct {
	Time          time.Time
	Kind          EventKind
	Namespace     string
	Pod           string
	ReplicatedJob string
	Epoch         int32
	ExitCode      int32
}

// Recorder keeps the events of every simulated Pod, in order.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

// Record adds an event.
func (r *Recorder) Record(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Events returns the events of one namespace in the order recorded.
func (r *Recorder) Events(namespace string) []Event {
	events, _ := r.EventsSince(namespace, 0)
	return events
}

// EventsSince returns the events of one namespace recorded at or after
// position from of the whole record, and the position to pass next time:
// a poller reads each event once instead of the whole record on every
// poll. Positions restart at 0 after Reset.
func (r *Recorder) EventsSince(namespace string, from int) ([]Event, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.events[min(from, len(r.events)):] {
		if e.Namespace == namespace {
			out = append(out, e)
		}
	}
	return out, len(r.events)
}

// Len is the position of the next event to be recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// Reset forgets every event recorded so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.events = slices.Delete(r.events, 0, len(r.events))
	r.mu.Unlock()
}
