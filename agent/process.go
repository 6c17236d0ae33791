package agent

import (
	"context"
	"encoding/json"
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

// unheardWait is how long a new epoch waits for a supervisor the agent has
// not heard from, when an earlier run of the agent may have let its worker
// start; a supervisor it has heard from is waited for until its worker
// stops (it kills it after the grace period).
const unheardWait = 10 * time.Second

type processHub struct {
	mu    sync.Mutex
	state protocol.SupervisorState
	// changed is closed and replaced at each change of state, and at each
	// change of what a supervisor runs.
	changed chan struct{}
	// running is the epoch each supervisor's worker runs at (0: none), for
	// the supervisors heard from.
	running    map[string]int32
	containers []string
	exits      []protocol.WorkerExit
	exited     chan struct{}
	// readyAt is the epoch at which each supervisor's worker last passed
	// its readiness probe; readied is signalled when all have at the
	// current epoch.
	readyAt map[string]int32
	readied chan struct{}
}

func newProcessHub(containers []string) *processHub {
	return &processHub{
		// Above any version an earlier run of the agent gave, so that a
		// supervisor's long poll of the earlier run answers at once.
		state:      protocol.SupervisorState{Version: uint64(time.Now().UnixNano())},
		changed:    make(chan struct{}),
		running:    map[string]int32{},
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
	if epoch != h.state.Epoch {
		return
	}
	for _, c := range h.containers {
		if h.readyAt[c] != epoch {
			return
		}
	}
	select {
	case h.readied <- struct{}{}:
	default:
	}
}

// readyEpoch is the epoch at which every supervised worker is ready, 0 if
// none.
func (h *processHub) readyEpoch() int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
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

// set moves the supervisors to epoch, its barrier lifted or not.
func (h *processHub) set(epoch int32, lifted bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state.Epoch == epoch && h.state.Lifted == lifted {
		return
	}
	h.state.Version++
	h.state.Epoch, h.state.Lifted = epoch, lifted
	h.notify()
}

// heard records what a supervisor runs.
func (h *processHub) heard(container string, running int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.running[container]; ok && old == running {
		return
	}
	h.running[container] = running
	h.notify()
}

// start grants a supervisor's start at epoch if its barrier is lifted.
func (h *processHub) start(container string, epoch int32) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state.Epoch != epoch || !h.state.Lifted {
		return false
	}
	h.running[container] = epoch
	h.notify()
	return true
}

// exit records a worker's exit.
func (h *processHub) exit(e protocol.WorkerExit) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running[e.Container] == e.Epoch {
		h.running[e.Container] = 0
		h.notify()
	}
	if e.Epoch != h.state.Epoch || slices.Contains(h.exits, e) {
		return
	}
	h.exits = append(h.exits, e)
	select {
	case h.exited <- struct{}{}:
	default:
	}
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
// after unheard (0: at once). It returns the containers it gave up on.
func (h *processHub) waitStopped(ctx context.Context, unheard time.Duration) []string {
	deadline := time.Now().Add(unheard)
	for {
		h.mu.Lock()
		var waiting, unknown []string
		for _, c := range h.containers {
			r, ok := h.running[c]
			switch {
			case !ok:
				unknown = append(unknown, c)
			case r != 0 && r != h.state.Epoch:
				waiting = append(waiting, c)
			}
		}
		changed := h.changed
		h.mu.Unlock()
		left := time.Until(deadline)
		if len(waiting) == 0 && (len(unknown) == 0 || left <= 0) {
			return unknown
		}
		var timeout <-chan time.Time
		if len(waiting) == 0 {
			t := time.NewTimer(left)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
		case <-ctx.Done():
			return append(waiting, unknown...)
		}
	}
}

// serveSupervisors adds the supervisors' endpoints to mux.
func (h *processHub) serveSupervisors(mux *http.ServeMux) {
	query := func(r *http.Request) (container string, epoch int32, ok bool) {
		container = r.URL.Query().Get("container")
		n, err := strconv.ParseInt(r.URL.Query().Get("epoch"), 10, 32)
		return container, int32(n), container != "" && err == nil
	}
	mux.HandleFunc("GET "+protocol.SupervisorStatePath, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		container := q.Get("container")
		running, err1 := strconv.ParseInt(q.Get("running"), 10, 32)
		after, err2 := strconv.ParseUint(q.Get("after"), 10, 64)
		if container == "" || err1 != nil || err2 != nil {
			http.Error(w, "want container, running and after", http.StatusBadRequest)
			return
		}
		h.heard(container, int32(running))
		t := time.NewTimer(supervisorHold)
		defer t.Stop()
		for {
			h.mu.Lock()
			st, changed := h.state, h.changed
			h.mu.Unlock()
			if st.Version != after {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(st) // a supervisor gone away asks again
				return
			}
			select {
			case <-changed:
			case <-t.C:
				after = st.Version + 1 // answer with what is, unchanged
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("POST "+protocol.SupervisorStartPath, func(w http.ResponseWriter, r *http.Request) {
		container, epoch, ok := query(r)
		switch {
		case !ok:
			http.Error(w, "want container and epoch", http.StatusBadRequest)
		case h.start(container, epoch):
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusConflict)
		}
	})
	mux.HandleFunc("POST "+protocol.SupervisorReadyPath, func(w http.ResponseWriter, r *http.Request) {
		container, epoch, ok := query(r)
		if !ok {
			http.Error(w, "want container and epoch", http.StatusBadRequest)
			return
		}
		h.ready(container, epoch)
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("POST "+protocol.SupervisorExitPath, func(w http.ResponseWriter, r *http.Request) {
		container, epoch, ok := query(r)
		code, err := strconv.Atoi(r.URL.Query().Get("code"))
		if !ok || err != nil {
			http.Error(w, "want container, epoch and code", http.StatusBadRequest)
			return
		}
		h.exit(protocol.WorkerExit{Epoch: epoch, Container: container, Code: code})
		w.WriteHeader(http.StatusOK)
	})
}
