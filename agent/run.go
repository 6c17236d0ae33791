package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inplace-dev/inplace/broadcast"
)

// Transport is how the agent talks to the rest of the protocol.
type Transport interface {
	// Broadcasts delivers the JobSet's broadcast, current first, then every
	// change, until ctx ends; it re-establishes its watch by itself.
	Broadcasts(ctx context.Context) (<-chan broadcast.Broadcast, error)
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
	// Listen is the address of /barrier-is-lifted and /healthz.
	Listen string
}

// BarrierPath and HealthPath are the agent's endpoints.
const (
	BarrierPath = "/barrier-is-lifted"
	HealthPath  = "/healthz"
)

// Run runs the agent until ctx ends (exit code 0) or its epoch is
// deprecated (the restart exit code).
func Run(ctx context.Context, log logr.Logger, cfg Config, t Transport) (int, error) {
	var lifted atomic.Bool
	srv, err := serve(log, cfg.Listen, &lifted)
	if err != nil {
		return 1, err
	}
	defer srv.Close()

	updates, err := t.Broadcasts(ctx)
	if err != nil {
		return 1, fmt.Errorf("watching the broadcast: %w", err)
	}
	var first broadcast.Broadcast
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
			if err := report(ctx, t, d.ReportEpoch); err != nil {
				return 0, nil // ctx ended
			}
		}
		if d.LiftBarrier {
			lifted.Store(true)
			log.Info("barrier lifted", "epoch", m.Epoch())
		}
		if d.Restart {
			log.Info("epoch deprecated: restarting the Pod in place", "epoch", m.Epoch(), "exitCode", cfg.RestartExitCode)
			return cfg.RestartExitCode, nil
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

// report writes the epoch, retrying with backoff and jitter: the whole
// group waits for it.
func report(ctx context.Context, t Transport, epoch int32) error {
	return wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: 5 * time.Second},
		func(ctx context.Context) (bool, error) {
			return t.ReportEpoch(ctx, epoch) == nil, nil
		})
}

// serve answers /healthz always and /barrier-is-lifted once lifted.
func serve(log logr.Logger, addr string, lifted *atomic.Bool) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc(HealthPath, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc(BarrierPath, func(w http.ResponseWriter, _ *http.Request) {
		if lifted.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "serving the barrier")
		}
	}()
	return srv, nil
}
