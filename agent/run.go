package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/inplace-dev/inplace/api/protocol"
)

// Transport is how the agent talks to the rest of the protocol.
type Transport interface {
	// Broadcasts delivers the JobSet's broadcast, current first, then every
	// change, until ctx ends; it re-establishes its watch by itself.
	Broadcasts(ctx context.Context) (<-chan protocol.Broadcast, error)
	// ReportEpoch writes the agent's epoch on its Pod.
	ReportEpoch(ctx context.Context, epoch int32) error
	// Self returns the epoch the Pod carries (0 if none) and whether its
	// worker containers are running.
	Self(ctx context.Context) (epoch int32, workersRunning bool, err error)
}

// Config is the agent's configuration, from its environment.
type Config struct {
	ReplicatedJob   string
	RestartExitCode int
	// Listen is the address of the barrier and /healthz.
	Listen string
	// BarrierPath is the barrier's path, answered once it has lifted;
	// empty means protocol.BarrierPath. Upstream JobSet's manifests probe
	// /barrier-is-down.
	BarrierPath string
	// Listener, if set, is used instead of listening on Listen: a host
	// that runs agents in its own process (the simulated nodes) gives each
	// its own network.
	Listener net.Listener
	// BarrierHold is how long a request to /barrier-is-lifted waits for the
	// barrier to lift before it answers that it has not. The kubelet's
	// startup probe then sees the lift at once, not a probe period later;
	// it must stay below the probe's timeoutSeconds. 0 answers at once.
	BarrierHold time.Duration
}

// Run runs the agent until ctx ends (exit code 0) or its epoch is
// deprecated (the restart exit code).
func Run(ctx context.Context, log logr.Logger, cfg Config, t Transport) (int, error) {
	lifted := newBarrier()
	l := cfg.Listener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", cfg.Listen); err != nil {
			return 1, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
		}
	}
	// Closed here as well as by the server: the port must be free when Run
	// returns, even if the server had not begun serving yet.
	defer l.Close()
	path := cfg.BarrierPath
	if path == "" {
		path = protocol.BarrierPath
	}
	srv := serve(log, l, path, lifted, cfg.BarrierHold)
	defer srv.Close()

	updates, err := t.Broadcasts(ctx)
	if err != nil {
		return 1, fmt.Errorf("watching the broadcast: %w", err)
	}
	var first protocol.Broadcast
	select {
	case <-ctx.Done():
		return 0, nil
	case first = <-updates:
	}
	podEpoch, workersRunning, err := t.Self(ctx)
	if err != nil {
		return 1, fmt.Errorf("reading its own Pod: %w", err)
	}
	m := NewMachine(cfg.ReplicatedJob)
	d := m.Start(first, podEpoch, workersRunning)
	log.Info("started", "epoch", m.Epoch(), "resumed", d.ReportEpoch == 0, "synced", first.SyncedEpoch, "deprecated", first.DeprecatedEpoch)
	for {
		if d.ReportEpoch != 0 {
			if err := report(ctx, log, t, d.ReportEpoch); err != nil {
				return 0, nil // ctx ended
			}
		}
		if d.LiftBarrier {
			lifted.lift(m.Epoch())
			log.Info("barrier lifted", "epoch", m.Epoch())
		}
		if d.Restart {
			// Not the restart code if the kubelet is already stopping this
			// Pod (SIGTERM): that would restart it in place instead.
			code := FinalExitCode(ctx, cfg.RestartExitCode, cfg.RestartExitCode)
			log.Info("epoch deprecated: exiting to restart the Pod in place", "epoch", m.Epoch(), "exitCode", code, "podStopping", code != cfg.RestartExitCode)
			return code, nil
		}
		select {
		case <-ctx.Done():
			return 0, nil
		case b, ok := <-updates:
			if !ok {
				return 0, nil
			}
			d = m.Observe(b)
		}
	}
}

// FinalExitCode is the code the agent's process exits with: code, except
// that once ctx has ended (the kubelet is stopping the Pod: SIGTERM) it is
// never the restart code, which would restart a Pod on its way out in
// place. The check is made again at the very end because the signal may
// come after Run decided to restart.
func FinalExitCode(ctx context.Context, code, restartCode int) int {
	if code == restartCode && ctx.Err() != nil {
		return 0
	}
	return code
}

// report writes the epoch, retrying until it is written: the whole group
// waits for it.
func report(ctx context.Context, log logr.Logger, t Transport, epoch int32) error {
	return Retry(ctx, func(ctx context.Context) error {
		err := t.ReportEpoch(ctx, epoch)
		if err != nil {
			log.V(1).Info("reporting the epoch failed; retrying", "epoch", epoch, "error", err)
		}
		return err
	}, nil)
}

// barrier is closed once lifted, at epoch.
type barrier struct {
	once  sync.Once
	ch    chan struct{}
	epoch atomic.Int32
}

func newBarrier() *barrier { return &barrier{ch: make(chan struct{})} }

func (b *barrier) lift(epoch int32) {
	b.once.Do(func() {
		b.epoch.Store(epoch)
		close(b.ch)
	})
}

// wait reports whether the barrier is lifted, waiting up to hold for it.
func (b *barrier) wait(ctx context.Context, hold time.Duration) bool {
	select {
	case <-b.ch:
		return true
	default:
	}
	if hold <= 0 {
		return false
	}
	t := time.NewTimer(hold)
	defer t.Stop()
	select {
	case <-b.ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// serve answers /healthz always and the barrier's path once lifted,
// holding a request up to hold for the lift, on l until the server is
// closed.
func serve(log logr.Logger, l net.Listener, barrierPath string, lifted *barrier, hold time.Duration) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc(protocol.HealthPath, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc(barrierPath, func(w http.ResponseWriter, r *http.Request) {
		// The body says at which epoch the barrier lifted, so that a
		// worker can log what it was let through at; probes read only
		// the status.
		w.Header().Set("Content-Type", "application/json")
		if lifted.wait(r.Context(), hold) {
			w.WriteHeader(http.StatusOK)
			fmt.Fprintf(w, `{"lifted":true,"epoch":%d}`+"\n", lifted.epoch.Load())
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, `{"lifted":false}`)
	})
	srv := &http.Server{Addr: l.Addr().String(), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "serving the barrier")
		}
	}()
	return srv
}
