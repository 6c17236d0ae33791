package protocol

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The worker protocol of in-process scope (RestartScopeInProcess): how the
// supervisor tells the worker it runs that its epoch is over, and how the
// worker says it has left it, so that the worker runs on at the next epoch
// in the same process. It is language-neutral on purpose: lines of text on
// a Unix socket. docs/reference/worker-protocol.md is its description for
// the authors of workers; python/inplace_restart.py is PyTorch's side.
//
//	supervisor                                 worker
//	   │ ◀──────────── connect to $INPLACE_CONTROL ─┤
//	   ├─ start <e> ──────────────────────────────▶ │ runs at epoch e
//	   │            … the agent moves to epoch e' … │
//	   ├─ stop <e> ───────────────────────────────▶ │ leaves its step, tears
//	   │                                            │ its process group down
//	   │ ◀──────────────────────────── parked <e> ──┤
//	   │        … the barrier of e' lifts …         │
//	   ├─ start <e'> ─────────────────────────────▶ │ re-forms the group,
//	   │                                            │ resumes the checkpoint
//
// A worker that fails at epoch e may write "failed <e> <code>" before it
// exits with code: the restart begins at once, while its process ends,
// rather than once it has (a Python process with torch loaded takes most
// of a second to end).
//
// A worker that has not written "parked <e>" within the deadline after
// "stop <e>" is stopped as in process scope (SIGTERM to its process group,
// SIGKILL after the grace period) and started again as a new process
// behind the next barrier. So is a worker that never connects.
const (
	// EnvWorkerControl is set on the worker, in in-process scope, to the
	// address of the supervisor's control socket: "@" and a name in Linux's
	// abstract socket namespace (no file: a read-only root file system
	// does not matter), or a path.
	EnvWorkerControl = "INPLACE_CONTROL"
	// EnvWorkerDeadline is set on the worker, in in-process scope, to the
	// deadline in seconds (a decimal number) it has to write "parked"
	// after "stop".
	EnvWorkerDeadline = "INPLACE_PARK_DEADLINE"
	// EnvWorkerStandby is "1" on a standby: a process of the worker's
	// command started ahead, which connects and waits for "start" to take
	// the place of a worker that failed. It has no EnvWorkerEpoch.
	EnvWorkerStandby = "INPLACE_STANDBY"
)

// The words of the worker protocol: each line is a word, a space and an
// epoch as Epoch.String writes it.
const (
	// WorkerStart, from the supervisor: the worker may run at the epoch.
	// Sent first on every connection, with the epoch the worker runs at,
	// and after the worker parked, once the barrier of the next epoch it
	// may run at lifts.
	WorkerStart = "start"
	// WorkerStop, from the supervisor: the epoch is over. The worker
	// leaves what it does at it and writes WorkerParked.
	WorkerStop = "stop"
	// WorkerParked, from the worker: it has left the epoch and holds no
	// connection to its peers of that epoch.
	WorkerParked = "parked"
	// WorkerFailed, from the worker, followed by its exit code: it failed
	// at the epoch, and its process ends with that code. The supervisor
	// takes it as that exit, before the exit itself. A code that does not
	// restart in place is judged at the exit, as any other.
	WorkerFailed = "failed"
)

// DefaultParkDeadline is how long a worker has to park after WorkerStop
// unless the JobSet's ParkDeadlineAnnotation says otherwise.
const DefaultParkDeadline = 10 * time.Second

// ParkDeadlineAnnotation on a JobSet in in-process scope sets the
// deadline, as a Go duration ("20s"), of its workers to park.
const ParkDeadlineAnnotation = "inplace.dev/park-deadline"

// The bounds of ParkDeadlineAnnotation, which the built-in policy checks
// and the webhook holds to.
const (
	MinParkDeadline = time.Second
	MaxParkDeadline = 10 * time.Minute
)

// StandbyAnnotation "true" on a JobSet in in-process scope has each
// worker's supervisor keep a standby: a process of the worker's command
// started ahead, which takes the place of a worker that fails. Off by
// default: a standby holds the memory of a worker that has done its
// imports.
const StandbyAnnotation = "inplace.dev/standby"

// WorkerLine is one line of the worker protocol.
type WorkerLine struct {
	Word  string
	Epoch Epoch
	// Code is WorkerFailed's exit code.
	Code int
}

// String is the line as written, without its newline.
func (l WorkerLine) String() string {
	if l.Word == WorkerFailed {
		return fmt.Sprintf("%s %s %d", l.Word, l.Epoch, l.Code)
	}
	return l.Word + " " + l.Epoch.String()
}

// ParseWorkerLine parses a line of the worker protocol, its newline
// trimmed.
func ParseWorkerLine(line string) (WorkerLine, error) {
	fields := strings.Split(strings.TrimRight(line, "\r\n"), " ")
	word := fields[0]
	switch {
	case word == WorkerFailed && len(fields) == 3:
	case (word == WorkerStart || word == WorkerStop || word == WorkerParked) && len(fields) == 2:
	default:
		return WorkerLine{}, fmt.Errorf("worker protocol: %q is not %q, %q or %q and an epoch, nor %q, an epoch and an exit code",
			line, WorkerStart, WorkerStop, WorkerParked, WorkerFailed)
	}
	e, err := ParseEpoch(fields[1])
	if err != nil || e == 0 {
		return WorkerLine{}, fmt.Errorf("worker protocol: %q: the epoch must be a number from 1", line)
	}
	l := WorkerLine{Word: word, Epoch: e}
	if word == WorkerFailed {
		if l.Code, err = strconv.Atoi(fields[2]); err != nil || strings.TrimLeft(fields[2], "0123456789") != "" || strings.HasPrefix(fields[2], "0") || l.Code < 1 || l.Code > 255 {
			return WorkerLine{}, fmt.Errorf("worker protocol: %q: the exit code must be a number from 1 to 255", line)
		}
	}
	return l, nil
}
