package reports

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/api/protocol"
)

// openStream GETs the broadcast stream as the agent of tok over HTTP/2,
// and returns its answer; the stream ends with the test.
func openStream(t *testing.T, f *fixture, client *http.Client, tok string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+f.srv.Addr().String()+protocol.BroadcastPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", protocol.BroadcastPath, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// nextBroadcast reads the stream's next line, failing the test if none
// comes within timeout.
func nextBroadcast(t *testing.T, lines *bufio.Scanner) protocol.Broadcast {
	t.Helper()
	got := make(chan bool, 1)
	go func() { got <- lines.Scan() }()
	select {
	case ok := <-got:
		if !ok {
			t.Fatalf("the stream ended: %v, want a broadcast", lines.Err())
		}
	case <-time.After(timeout):
		t.Fatalf("no broadcast within %s", timeout)
	}
	var data map[string]string
	if err := json.Unmarshal(lines.Bytes(), &data); err != nil {
		t.Fatalf("the stream's line %q is not the ConfigMap's data: %v", lines.Text(), err)
	}
	b, err := protocol.DecodeBroadcast(data)
	if err != nil {
		t.Fatalf("the streamed data is no broadcast: %v", err)
	}
	return b
}

func (f *fixture) streamsOpen(t *testing.T) float64 {
	t.Helper()
	var m dto.Metric
	if err := f.srv.streamsOpen.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// TestBroadcastStreamFollowsTheCache: an agent's stream begins with its
// JobSet's broadcast as the cache holds it, and carries each change the
// informer reports, on the connection it reports on.
func TestBroadcastStreamFollowsTheCache(t *testing.T) {
	w := newWorld()
	c := w.reader(t).(client.Client)
	f := newFixture(t, c)
	ka := defaultKeepAlive
	ka.request = 200 * time.Millisecond
	tlsConfig := startKeepAliveServer(t, f, ka)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}}
	defer hc.CloseIdleConnections()

	resp := openStream(t, f, hc, "p0")
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("GET the broadcast: %d over %s, want 200 over HTTP/2", resp.StatusCode, resp.Proto)
	}
	lines := bufio.NewScanner(resp.Body)
	want := protocol.Broadcast{SyncedEpoch: synced, DeprecatedEpoch: synced - 1}
	if diff := cmp.Diff(want, nextBroadcast(t, lines)); diff != "" {
		t.Errorf("the first broadcast (-want +got):\n%s", diff)
	}
	if got := f.streamsOpen(t); got != 1 {
		t.Errorf("inplace_agent_broadcast_streams = %v, want 1", got)
	}

	// Quiet for many times the server's request timeout: a stream is not
	// a request, and outlives it.
	quiet := time.NewTimer(5 * ka.request)
	<-quiet.C
	f.srv.BroadcastChanged(types.NamespacedName{Namespace: testNS, Name: "unrelated"})
	for _, next := range []protocol.Broadcast{
		{SyncedEpoch: synced, DeprecatedEpoch: synced},
		{SyncedEpoch: synced + 1, DeprecatedEpoch: synced, Reports: f.srv.Endpoint()},
	} {
		cm := w.broadcast.DeepCopy()
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(cm), cm); err != nil {
			t.Fatal(err)
		}
		cm.Data = protocol.EncodeBroadcast(next)
		if err := c.Update(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
		f.srv.BroadcastChanged(client.ObjectKeyFromObject(cm))
		if diff := cmp.Diff(next, nextBroadcast(t, lines)); diff != "" {
			t.Errorf("the broadcast after a change (-want +got):\n%s", diff)
		}
	}
	if got := f.results(t)["stream"]; got != 1 {
		t.Errorf("%s{result=stream} = %v, want 1", metric, got)
	}

	// The token's Pod deleted: its stream ends at the next change.
	if err := c.Delete(context.Background(), w.pods["p0"]); err != nil {
		t.Fatal(err)
	}
	f.srv.BroadcastChanged(client.ObjectKeyFromObject(w.broadcast))
	ended := make(chan bool, 1)
	go func() { ended <- lines.Scan() }()
	select {
	case more := <-ended:
		if more {
			t.Errorf("the stream of a deleted Pod carried %q, want its end", lines.Text())
		}
	case <-time.After(timeout):
		t.Error("the stream of a deleted Pod is still open")
	}
}

// TestBroadcastStreamRefusals: a stream is the broadcast of the token's
// Pod's JobSet, of a Pod that exists, and of nothing else.
func TestBroadcastStreamRefusals(t *testing.T) {
	cases := map[string]struct {
		world      func(*world)
		req        request
		wantStatus int
		wantResult string
	}{
		"no bearer":               {nil, request{method: http.MethodGet}, http.StatusUnauthorized, protocol.ReasonUnauthenticated},
		"a token refused":         {nil, request{method: http.MethodGet, token: "forged"}, http.StatusForbidden, protocol.ReasonTokenRefused},
		"a Pod gone":              {nil, request{method: http.MethodGet, token: "stale"}, http.StatusForbidden, protocol.ReasonPodGone},
		"a Pod being deleted":     {nil, request{method: http.MethodGet, token: "deleting"}, http.StatusForbidden, protocol.ReasonPodGone},
		"an earlier JobSet's Pod": {nil, request{method: http.MethodGet, token: "earlier"}, http.StatusForbidden, "other_jobset"},
		"a JobSet gone":           {nil, request{method: http.MethodGet, token: "orphan"}, http.StatusForbidden, "other_jobset"},
		"no broadcast cached":     {func(w *world) { w.broadcast = nil }, request{method: http.MethodGet, token: "p0"}, http.StatusNotFound, "no_broadcast"},
		"another's ConfigMap":     {func(w *world) { w.broadcast.OwnerReferences = nil }, request{method: http.MethodGet, token: "p0"}, http.StatusForbidden, "other_jobset"},
		"a PUT":                   {nil, request{method: http.MethodPut, token: "p0"}, http.StatusMethodNotAllowed, "bad_request"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld()
			if tc.world != nil {
				tc.world(w)
			}
			f := newFixture(t, w.reader(t))
			tc.req.path = protocol.BroadcastPath
			got := f.do(t, tc.req)
			if got.Code != tc.wantStatus {
				t.Errorf("status %d (%s), want %d", got.Code, got.Body.String(), tc.wantStatus)
			}
			if got := f.results(t); got[tc.wantResult] != 1 || got["stream"] != 0 {
				t.Errorf("results %v, want one %q and no stream", got, tc.wantResult)
			}
			if got := f.streamsOpen(t); got != 0 {
				t.Errorf("inplace_agent_broadcast_streams = %v after a refusal, want 0", got)
			}
		})
	}
}

// TestBroadcastStreamsAreBounded: one Pod's token holds two streams at
// most, and the end of the term ends every stream at once, so that the
// leader stops without waiting on them and the agents watch instead.
func TestBroadcastStreamsAreBounded(t *testing.T) {
	f := newFixture(t, newWorld().reader(t))
	if err := f.srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- f.srv.Start(ctx) }()
	tlsConfig := startedTLS(t, f)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}}
	defer hc.CloseIdleConnections()

	var open []*bufio.Scanner
	for range maxStreamsPerPod {
		resp := openStream(t, f, hc, "p0")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: status %d, want 200", len(open)+1, resp.StatusCode)
		}
		lines := bufio.NewScanner(resp.Body)
		nextBroadcast(t, lines)
		open = append(open, lines)
	}
	if resp := openStream(t, f, hc, "p0"); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("stream %d of one Pod: status %d, want 429", maxStreamsPerPod+1, resp.StatusCode)
	}
	if got := f.streamsOpen(t); got != maxStreamsPerPod {
		t.Errorf("inplace_agent_broadcast_streams = %v, want %d", got, maxStreamsPerPod)
	}

	began := time.Now()
	cancel()
	for i, lines := range open {
		ended := make(chan bool, 1)
		go func() { ended <- lines.Scan() }()
		select {
		case more := <-ended:
			if more {
				t.Errorf("stream %d carried %q after the term ended, want its end", i+1, lines.Text())
			}
		case <-time.After(timeout):
			t.Fatalf("stream %d still open %s after the term ended", i+1, timeout)
		}
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Start: %v", err)
		}
		// Shutdown waits up to 5 s for requests in flight: the streams
		// must not be among them.
		if took := time.Since(began); took > 4*time.Second {
			t.Errorf("the endpoint took %s to stop with streams open, want them ended at once", took)
		}
	case <-time.After(timeout):
		t.Fatal("the endpoint did not stop")
	}
	if got := f.streamsOpen(t); got != 0 {
		t.Errorf("inplace_agent_broadcast_streams = %v after the term, want 0", got)
	}
}
