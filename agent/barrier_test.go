package agent

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/inplace-dev/inplace/api/protocol"
)

// The barrier endpoint holds a request until the barrier lifts, and
// answers the moment it does.
func TestBarrierHoldsTheProbeUntilItLifts(t *testing.T) {
	b := newBarrier()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(logr.Discard(), l, protocol.BarrierPath, b, 5*time.Second, nil)
	defer srv.Close()
	url := "http://" + srv.Addr + protocol.BarrierPath

	type answer struct {
		code int
		body string
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.Get(url)
		if err != nil {
			answered <- answer{}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, string(body)}
	}()
	select {
	case a := <-answered:
		t.Fatalf("answered %d before the barrier lifted", a.code)
	case <-time.After(100 * time.Millisecond):
	}
	lifted := time.Now()
	b.lift(3)
	select {
	case a := <-answered:
		if a.code != http.StatusOK {
			t.Fatalf("answered %d after the lift, want 200", a.code)
		}
		// The body tells the worker the epoch it was let through at.
		if want := `{"lifted":true,"epoch":3}` + "\n"; a.body != want {
			t.Errorf("body %q, want %q", a.body, want)
		}
		if d := time.Since(lifted); d > time.Second {
			t.Errorf("answered %v after the lift", d)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("the held probe was not answered when the barrier lifted")
	}
}

func TestBarrierAnswersNotYetAfterItsHold(t *testing.T) {
	b := newBarrier()
	start := time.Now()
	if b.wait(context.Background(), 50*time.Millisecond) {
		t.Fatal("lifted without a lift")
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("answered after %v, before its hold", d)
	}
	if b.wait(context.Background(), 0) {
		t.Fatal("lifted without a lift")
	}
	b.lift(1)
	b.lift(2) // lifting twice is harmless, and keeps the first epoch
	if !b.wait(context.Background(), 0) {
		t.Fatal("not lifted after a lift")
	}
	if got := b.epoch.Load(); got != 1 {
		t.Errorf("lifted at epoch %d, want 1", got)
	}
}

// An agent whose Pod is being stopped never exits with the restart code.
func TestFinalExitCode(t *testing.T) {
	live := context.Background()
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		code int
		want int
	}{
		{"restart while running", live, 88, 88},
		{"restart decided as the Pod is stopped", stopped, 88, 0},
		{"an error exit stays one", stopped, 1, 1},
		{"a clean exit", stopped, 0, 0},
	} {
		if got := FinalExitCode(tc.ctx, tc.code, 88); got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.want)
		}
	}
}
