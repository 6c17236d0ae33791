package agent

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"

	"github.com/inplace-dev/inplace/api/protocol"
)

// newMemory is an endpoint memory that holds ep.
func newMemory(ep protocol.ReportEndpoint) *EndpointInMemory {
	m := &EndpointInMemory{}
	_ = m.Remember(ep)
	return m
}

func receive(t *testing.T, in <-chan protocol.Broadcast) protocol.Broadcast {
	t.Helper()
	select {
	case b, ok := <-in:
		if !ok {
			t.Fatal("the broadcasts ended")
		}
		return b
	case <-time.After(directWait):
		t.Fatal("no broadcast")
	}
	return protocol.Broadcast{}
}

func (a *apiStandIn) watched() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.watches
}

// TestDirectFollowsTheLeaderWhenStartedAgain: an agent started again in
// its Pod, with the endpoint remembered, reads its broadcast from the
// leader and opens no watch; its reports go on the same connection.
func TestDirectFollowsTheLeaderWhenStartedAgain(t *testing.T) {
	api, leader := newAPIStandIn(t, runningPod(nil)), newLeaderStandIn(t)
	d := newDirect(t, api, testr.New(t))
	// The stream's first broadcast comes when the test sends it, not at
	// once as the leader's: no fallback meanwhile.
	d.FallbackAfter = directWait
	// Ended first: the leader's server waits for the stream to close.
	ctx := directContext(t)
	ep := leader.endpoint("s1")
	d.Memory = newMemory(ep)
	in, err := d.Broadcasts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []protocol.Broadcast{
		{SyncedEpoch: 2, DeprecatedEpoch: 2, Reports: ep},
		{SyncedEpoch: 3, DeprecatedEpoch: 2, Reports: ep},
	} {
		leader.send(t, want)
		if diff := cmp.Diff(want, receive(t, in)); diff != "" {
			t.Errorf("the broadcast (-want +got):\n%s", diff)
		}
	}
	if err := d.ReportEpoch(ctx, 3); err != nil {
		t.Fatal(err)
	}
	leader.waitPut(t)
	if _, conns := leader.requests(); conns != 1 || leader.streams.Load() != 1 {
		t.Errorf("%d connections and %d streams to the leader, want one of each", conns, leader.streams.Load())
	}
	if n := api.watched(); n != 0 {
		t.Errorf("the agent watched its broadcast %d times, want none: the leader streams it", n)
	}
}

// TestDirectWatchesWithoutTheLeader: an endpoint remembered that no longer
// answers (the leader gone) costs at most FallbackAfter: the agent then
// watches its broadcast, and remembers the endpoint it names.
func TestDirectWatchesWithoutTheLeader(t *testing.T) {
	api, leader := newAPIStandIn(t, runningPod(nil)), newLeaderStandIn(t)
	d := newDirect(t, api, testr.New(t))
	// Ended first: the leader's server waits for the stream to close.
	ctx := directContext(t)
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Accepts nothing: the dial succeeds, the handshake never ends.
	defer gone.Close()
	old := leader.endpoint("s0")
	old.Address = gone.Addr().String()
	mem := newMemory(old)
	d.Memory = mem
	began := time.Now()
	in, err := d.Broadcasts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := protocol.Broadcast{SyncedEpoch: 3, DeprecatedEpoch: 3, Reports: leader.endpoint("s1")}
	api.broadcast(t, next)
	if diff := cmp.Diff(next, receive(t, in)); diff != "" {
		t.Errorf("the broadcast watched (-want +got):\n%s", diff)
	}
	if took := time.Since(began); took < fallbackAfter {
		t.Errorf("the agent watched after %s, want it to try the leader for FallbackAfter (%s) first", took, fallbackAfter)
	}
	if got, _ := mem.Recall(); got != next.Reports {
		t.Errorf("remembered %+v, want the endpoint the broadcast names", got)
	}
}

// TestDirectWatchesWhenTheStreamNamesAnotherLeader: the leader followed is
// followed only while the broadcast names it; then the agent watches.
func TestDirectWatchesWhenTheStreamNamesAnotherLeader(t *testing.T) {
	api, leader := newAPIStandIn(t, runningPod(nil)), newLeaderStandIn(t)
	d := newDirect(t, api, testr.New(t))
	d.FallbackAfter = directWait
	// Ended first: the leader's server waits for the stream to close.
	ctx := directContext(t)
	d.Memory = newMemory(leader.endpoint("s1"))
	in, err := d.Broadcasts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	moved := protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 2, Reports: leader.endpoint("s2")}
	leader.send(t, moved)
	if diff := cmp.Diff(moved, receive(t, in)); diff != "" {
		t.Errorf("the streamed broadcast (-want +got):\n%s", diff)
	}
	next := protocol.Broadcast{SyncedEpoch: 3, DeprecatedEpoch: 2, Reports: leader.endpoint("s2")}
	api.broadcast(t, next)
	if diff := cmp.Diff(next, receive(t, in)); diff != "" {
		t.Errorf("the broadcast watched (-want +got):\n%s", diff)
	}
}

// TestEndpointFile: the endpoint survives in its file; the zero endpoint
// removes it; a file that is not an endpoint remembers nothing.
func TestEndpointFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), StateFile)
	f := EndpointFile(path)
	if _, ok := f.Recall(); ok {
		t.Fatal("an empty volume recalled an endpoint")
	}
	ep := protocol.ReportEndpoint{Address: "10.0.0.1:9445", ServerName: "inplace-agent-reports", CA: "-----BEGIN CERTIFICATE-----\n", Session: "s1"}
	if err := f.Remember(ep); err != nil {
		t.Fatal(err)
	}
	if got, ok := f.Recall(); !ok || got != ep {
		t.Errorf("Recall() = %+v, %v, want %+v", got, ok, ep)
	}
	if err := f.Remember(protocol.ReportEndpoint{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the file is still there after forgetting: %v", err)
	}
	if err := os.WriteFile(path, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Recall(); ok {
		t.Error("a file that is no endpoint recalled one")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("the state directory holds %d files, want only the endpoint's (no temporary file left)", len(entries))
	}
}
