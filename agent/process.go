package agent

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/inplace-dev/inplace/api/protocol"
)

// This file is the agent's side of process scope: the state it shares with
// the supervisors of its Pod's worker containers (processHub) and their
// endpoints. The agent restarts its Pod's workers by moving to a new epoch:
// every supervisor stops its worker, and the agent reports the new epoch
// only once they all have, so that a barrier never lifts while a worker of
// an older epoch still runs anywhere in the group.

// ProcessTransport is what the agent needs of its transport in process
// scope, beside Transport.
type ProcessTransport interface {
	Transport
	// ReportProcessEpoch writes the agent's epoch and the count of its
	// Pod's worker restarts in one write.
	ReportProcessEpoch(ctx context.Context, epoch, workerRestarts int32) error
	// ReportWorkerExit writes a worker's exit on the Pod, which the
	// controller reads as a terminated worker container.
	ReportWorkerExit(ctx context.Context, exit protocol.WorkerExit) error
	// ReportReady writes the epoch at which every supervised worker of the
	// Pod passed its readiness probe.
	ReportReady(ctx context.Context, epoch int32) error
}

// supervisorHold is how long a supervisor's state request with nothing new
// is held (below the supervisor's own timeout).
const supervisorHold = 15 * time.Second

// stoppedWait is how long past its worker's grace period a new epoch
// waits for a supervisor that is stopping its worker (a variable for the
// tests).
var stoppedWait = 10 * time.Second

// unheardWait is how long a new epoch waits for a supervisor the agent has
// not heard from, when an earlier run of the agent may have let its worker
// start; a supervisor it has heard from is waited for until its worker
// stops (it kills it after the grace period).
const unheardWait = 10 * time.Second

type processHub struct {
	mu    sync.Mutex
	state protocol.SupervisorState
	// set: the agent has chosen its epoch. Until then a supervisor's
	// question is held and an exit refused (503): an agent that restarted
	// alone must not tell its Pod's running workers anything before it
	// knows whether they may run on.
	set bool
	// changed is closed and replaced at each change of state, and at each
	// change of what a supervisor runs.
	changed chan struct{}
	// running is the epoch each supervisor's worker runs at (0: none), for
	// the supervisors heard from.
	running map[string]int32
	// granted is the generation of each supervisor's last granted start:
	// a report of an older generation, sent before the start, is stale.
	granted map[string]uint64
	// grace is the longest grace period a supervisor gives its worker
	// between SIGTERM and SIGKILL, as the supervisors report it.
	grace      time.Duration
	containers []string
	exits      []protocol.WorkerExit
	exited     chan struct{}
	// readyAt is the epoch at which each supervisor's worker last passed
	// its readiness probe; readied is signalled when all have at the
	// current epoch.
	readyAt map[string]int32
	readied chan struct{}
	// anyPeer serves supervisors from any address, not only the Pod's
	// loopback (the simulated nodes' Pod network has none).
	anyPeer bool
}

func newProcessHub(containers []string) *processHub {
	return &processHub{
		// Above any version an earlier run of the agent gave, so that a
		// supervisor's long poll of the earlier run answers at once.
		state:      protocol.SupervisorState{Version: uint64(time.Now().UnixNano())},
		changed:    make(chan struct{}),
		running:    map[string]int32{},
		granted:    map[string]uint64{},
		containers: containers,
		exited:     make(chan struct{}, 1),
		readyAt:    map[string]int32{},
		readied:    make(chan struct{}, 1),
	}
}

// ready records a worker's readiness at epoch.
func (h *processHub) ready(container string, epoch int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.readyAt[container] = epoch
	if h.readyEpochLocked() != 0 {
		select {
		case h.readied <- struct{}{}:
		default:
		}
	}
}

// readyEpoch is the current epoch if every supervised worker is ready at
// it, else 0.
func (h *processHub) readyEpoch() int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.readyEpochLocked()
}

func (h *processHub) readyEpochLocked() int32 {
	for _, c := range h.containers {
		if h.readyAt[c] != h.state.Epoch {
			return 0
		}
	}
	return h.state.Epoch
}

func (h *processHub) notify() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// setState moves the supervisors to epoch, its barrier lifted or not.
func (h *processHub) setState(epoch int32, lifted bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.set && h.state.Epoch == epoch && h.state.Lifted == lifted {
		return
	}
	h.set = true
	h.state.Version++
	h.state.Epoch, h.state.Lifted = epoch, lifted
	h.notify()
}

// heard records what a supervisor runs, as of its report's generation,
// and the grace period it gives its worker.
func (h *processHub) heard(container string, running int32, gen uint64, grace time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.grace = max(h.grace, grace)
	if gen < h.granted[container] {
		return // sent before its last start was granted
	}
	if old, ok := h.running[container]; ok && old == running {
		return
	}
	h.running[container] = running
	h.notify()
}

// start grants a supervisor's start at epoch if its barrier is lifted; gen
// is the generation its reports carry from the start on.
func (h *processHub) start(container string, epoch int32, gen uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.set || h.state.Epoch != epoch || !h.state.Lifted {
		return false
	}
	h.running[container] = epoch
	h.granted[container] = gen
	h.notify()
	return true
}

// exit records a worker's exit; false if the agent is not ready to hear it.
func (h *processHub) exit(e protocol.WorkerExit) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.set {
		return false
	}
	if h.running[e.Container] == e.Epoch {
		h.running[e.Container] = 0
		h.notify()
	}
	if e.Epoch != h.state.Epoch || slices.Contains(h.exits, e) {
		return true // of an epoch the agent has left: nothing to report
	}
	h.exits = append(h.exits, e)
	select {
	case h.exited <- struct{}{}:
	default:
	}
	return true
}

func (h *processHub) takeExits() []protocol.WorkerExit {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.exits
	h.exits = nil
	return out
}

// waitStopped waits until no supervisor runs a worker of an epoch other
// than the current one. A supervisor not heard from counts as stopped
// after unheard (0: at once); one heard from, after the grace period its
// worker has and stoppedWait more (a supervisor that does not answer
// then is stuck, and the group must not wait for it for ever: the
// controller's in-place restart timeout would recreate every Pod). It
// returns the containers it gave up on: stuck, still stopping their
// worker, and unknown, never heard from.
func (h *processHub) waitStopped(ctx context.Context, unheard time.Duration) (stuck, unknown []string) {
	start := time.Now()
	deadline := start.Add(unheard)
	for {
		h.mu.Lock()
		var waiting []string
		unknown = nil
		for _, c := range h.containers {
			r, ok := h.running[c]
			switch {
			case !ok:
				unknown = append(unknown, c)
			case r != 0 && r != h.state.Epoch:
				waiting = append(waiting, c)
			}
		}
		changed, stuckAfter := h.changed, start.Add(h.grace+stoppedWait)
		h.mu.Unlock()
		left := time.Until(deadline)
		if len(waiting) == 0 && (len(unknown) == 0 || left <= 0) {
			return nil, unknown
		}
		if len(waiting) > 0 && time.Until(stuckAfter) <= 0 {
			return waiting, unknown
		}
		if len(waiting) > 0 {
			left = time.Until(stuckAfter)
		}
		timer := time.NewTimer(left)
		timeout := timer.C
		select {
		case <-changed:
		case <-timeout:
		case <-ctx.Done():
		}
		timer.Stop()
		if ctx.Err() != nil {
			return waiting, unknown
		}
	}
}

// serveSupervisors adds the supervisors' endpoints to mux. Only the Pod's
// own containers may call them: they answer on the Pod's loopback alone,
// and only for the containers the agent supervises.
func (h *processHub) serveSupervisors(mux *http.ServeMux) {
	type query struct {
		container string
		epoch     int32
		gen       uint64
	}
	parse := func(w http.ResponseWriter, r *http.Request, needEpoch bool) (query, bool) {
		var q query
		if !h.anyPeer && !fromLoopback(r) {
			http.Error(w, "only the Pod's own containers may call the supervisors' endpoints", http.StatusForbidden)
			return q, false
		}
		v := r.URL.Query()
		q.container = v.Get("container")
		if !slices.Contains(h.containers, q.container) {
			http.Error(w, "not a supervised container: "+q.container, http.StatusNotFound)
			return q, false
		}
		if needEpoch {
			n, err := protocol.ParseEpoch(v.Get("epoch"))
			if err != nil {
				http.Error(w, "want epoch", http.StatusBadRequest)
				return q, false
			}
			q.epoch = int32(n)
		}
		if g := v.Get("gen"); g != "" {
			n, err := strconv.ParseUint(g, 10, 64)
			if err != nil {
				http.Error(w, "want gen", http.StatusBadRequest)
				return q, false
			}
			q.gen = n
		}
		return q, true
	}
	mux.HandleFunc("GET "+protocol.SupervisorStatePath, func(w http.ResponseWriter, r *http.Request) {
		q, ok := parse(w, r, false)
		if !ok {
			return
		}
		running, err1 := protocol.ParseEpoch(r.URL.Query().Get("running"))
		after, err2 := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
		if err1 != nil || err2 != nil {
			http.Error(w, "want running and after", http.StatusBadRequest)
			return
		}
		// Optional: the grace period its worker has, in seconds.
		grace, _ := strconv.Atoi(r.URL.Query().Get("grace"))
		h.heard(q.container, int32(running), q.gen, time.Duration(max(grace, 0))*time.Second)
		t := time.NewTimer(supervisorHold)
		defer t.Stop()
		for {
			h.mu.Lock()
			st, set, changed := h.state, h.set, h.changed
			h.mu.Unlock()
			if set && st.Version != after {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(st) // a supervisor gone away asks again
				return
			}
			select {
			case <-changed:
			case <-t.C:
				if !set {
					http.Error(w, "the agent has not chosen its epoch yet", http.StatusServiceUnavailable)
					return
				}
				after = st.Version + 1 // answer with what is, unchanged
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("POST "+protocol.SupervisorStartPath, func(w http.ResponseWriter, r *http.Request) {
		q, ok := parse(w, r, true)
		switch {
		case !ok:
		case h.start(q.container, q.epoch, q.gen):
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusConflict)
		}
	})
	mux.HandleFunc("POST "+protocol.SupervisorReadyPath, func(w http.ResponseWriter, r *http.Request) {
		q, ok := parse(w, r, true)
		if !ok {
			return
		}
		h.ready(q.container, q.epoch)
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("POST "+protocol.SupervisorExitPath, func(w http.ResponseWriter, r *http.Request) {
		q, ok := parse(w, r, true)
		if !ok {
			return
		}
		code, err := strconv.Atoi(r.URL.Query().Get("code"))
		if err != nil || code < 1 || code > 255 {
			http.Error(w, "want code, 1 to 255", http.StatusBadRequest)
			return
		}
		if !h.exit(protocol.WorkerExit{Epoch: q.epoch, Container: q.container, Code: code}) {
			http.Error(w, "the agent has not chosen its epoch yet", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

// fromLoopback reports whether a request came over the loopback: from a
// container of the agent's own Pod, which shares its network.
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
