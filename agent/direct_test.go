package agent

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

const (
	directNS      = "ns"
	directPod     = "p"
	directJobSet  = "js"
	directToken   = "the-token"
	fallbackAfter = 200 * time.Millisecond
	// directWait bounds every wait for something that should happen.
	directWait = 10 * time.Second
)

// apiStandIn is the API server as an agent uses it: its Pod, read and
// patched, and its broadcast ConfigMap, watched. It records the Pod's
// reads and patches.
type apiStandIn struct {
	srv        *httptest.Server
	broadcasts chan *corev1.ConfigMap
	patched    chan map[string]string

	mu      sync.Mutex
	pod     *corev1.Pod
	podGets int
	watches int
	patches []map[string]string
}

func newAPIStandIn(t *testing.T, pod *corev1.Pod) *apiStandIn {
	t.Helper()
	a := &apiStandIn{pod: pod, broadcasts: make(chan *corev1.ConfigMap), patched: make(chan map[string]string, 100)}
	done := make(chan struct{})
	podPath := fmt.Sprintf("/api/v1/namespaces/%s/pods/%s", directNS, directPod)
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == podPath && r.Method == http.MethodGet:
			a.mu.Lock()
			a.podGets++
			pod := a.pod.DeepCopy()
			a.mu.Unlock()
			writeJSON(w, http.StatusOK, pod)
		case r.URL.Path == podPath && r.Method == http.MethodPatch:
			var patch struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			}
			if err := json.NewDecoder(r.Body).Decode(&patch); err != nil {
				writeStatus(w, apierrors.NewBadRequest(err.Error()))
				return
			}
			a.mu.Lock()
			a.patches = append(a.patches, patch.Metadata.Annotations)
			if a.pod.Annotations == nil {
				a.pod.Annotations = map[string]string{}
			}
			maps.Copy(a.pod.Annotations, patch.Metadata.Annotations)
			pod := a.pod.DeepCopy()
			a.mu.Unlock()
			a.patched <- patch.Metadata.Annotations
			writeJSON(w, http.StatusOK, pod)
		case r.URL.Path == fmt.Sprintf("/api/v1/namespaces/%s/configmaps", directNS) && r.URL.Query().Get("watch") == "true":
			a.mu.Lock()
			a.watches++
			a.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for {
				select {
				case cm := <-a.broadcasts:
					_ = json.NewEncoder(w).Encode(metav1.WatchEvent{Type: "ADDED", Object: runtimeRaw(cm)})
					w.(http.Flusher).Flush()
				case <-r.Context().Done():
					return
				case <-done:
					return
				}
			}
		default:
			writeStatus(w, apierrors.NewNotFound(corev1.Resource("pods"), r.URL.Path))
		}
	}))
	t.Cleanup(func() {
		close(done)
		a.srv.Close()
	})
	return a
}

func runtimeRaw(o any) (raw runtime.RawExtension) {
	raw.Raw, _ = json.Marshal(o)
	return raw
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (a *apiStandIn) client() kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: a.srv.URL})
}

func (a *apiStandIn) seen() (gets int, patches []map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.podGets, append([]map[string]string(nil), a.patches...)
}

// broadcast sends the broadcast ConfigMap to the agent's watch.
func (a *apiStandIn) broadcast(t *testing.T, b protocol.Broadcast) {
	t.Helper()
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: protocol.BroadcastName(directJobSet), Namespace: directNS},
		Data:       protocol.EncodeBroadcast(b),
	}
	select {
	case a.broadcasts <- cm:
	case <-time.After(directWait):
		t.Fatal("the agent never watched its broadcast")
	}
}

// leaderStandIn is the controller's leader's report endpoint: HTTP/2
// over TLS, with httptest's certificate for example.com. It records every
// request and answers as answer says (200 with the report by default).
type leaderStandIn struct {
	srv  *httptest.Server
	puts chan protocol.Report
	// stream is what the broadcast stream sends, a broadcast at a time.
	stream chan protocol.Broadcast
	// streams counts the streams opened.
	streams atomic.Int32
	// closed is told of every connection closed.
	closed chan struct{}

	mu     sync.Mutex
	reqs   []leaderRequest
	conns  int
	answer func(method string, r protocol.Report) (int, any)
}

type leaderRequest struct {
	method, auth string
	protoMajor   int
	report       protocol.Report
}

func newLeaderStandIn(t *testing.T) *leaderStandIn {
	t.Helper()
	l := &leaderStandIn{puts: make(chan protocol.Report, 100), closed: make(chan struct{}, 100), stream: make(chan protocol.Broadcast)}
	l.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == protocol.BroadcastPath {
			l.serveStream(w, r)
			return
		}
		if r.URL.Path != protocol.ReportPath {
			http.NotFound(w, r)
			return
		}
		var report protocol.Report
		if r.Method == http.MethodPut {
			if err := json.NewDecoder(r.Body).Decode(&report); err != nil {
				writeJSON(w, http.StatusBadRequest, protocol.ReportAnswer{Message: err.Error()})
				return
			}
		}
		l.mu.Lock()
		l.reqs = append(l.reqs, leaderRequest{method: r.Method, auth: r.Header.Get("Authorization"), protoMajor: r.ProtoMajor, report: report})
		answer := l.answer
		l.mu.Unlock()
		status, body := http.StatusOK, any(report)
		if answer != nil {
			status, body = answer(r.Method, report)
		}
		writeJSON(w, status, body)
		if r.Method == http.MethodPut {
			l.puts <- report
		}
	}))
	l.srv.EnableHTTP2 = true
	l.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			l.mu.Lock()
			l.conns++
			l.mu.Unlock()
		case http.StateClosed:
			l.closed <- struct{}{}
		}
	}
	l.srv.StartTLS()
	t.Cleanup(l.srv.Close)
	return l
}

// serveStream streams what l.stream is sent, as the leader streams the
// broadcast.
func (l *leaderStandIn) serveStream(w http.ResponseWriter, r *http.Request) {
	l.streams.Add(1)
	if r.Header.Get("Authorization") != "Bearer "+directToken {
		writeJSON(w, http.StatusUnauthorized, protocol.ReportAnswer{Message: "no token"})
		return
	}
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for {
		select {
		case b := <-l.stream:
			_ = json.NewEncoder(w).Encode(protocol.EncodeBroadcast(b))
			w.(http.Flusher).Flush()
		case <-r.Context().Done():
			return
		}
	}
}

// send streams b to the agent following the leader.
func (l *leaderStandIn) send(t *testing.T, b protocol.Broadcast) {
	t.Helper()
	select {
	case l.stream <- b:
	case <-time.After(directWait):
		t.Fatal("the agent never followed the leader's broadcast")
	}
}

func (l *leaderStandIn) setAnswer(answer func(method string, r protocol.Report) (int, any)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answer = answer
}

func (l *leaderStandIn) requests() ([]leaderRequest, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]leaderRequest(nil), l.reqs...), l.conns
}

func (l *leaderStandIn) endpoint(session string) protocol.ReportEndpoint {
	return protocol.ReportEndpoint{
		Address: l.srv.Listener.Addr().String(), ServerName: "example.com", Session: session,
		CA: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: l.srv.Certificate().Raw})),
	}
}

// waitPut waits for the leader's next PUT.
func (l *leaderStandIn) waitPut(t *testing.T) protocol.Report {
	t.Helper()
	select {
	case r := <-l.puts:
		return r
	case <-time.After(directWait):
		t.Fatal("no report reached the leader")
		return protocol.Report{}
	}
}

func runningPod(annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: directPod, Namespace: directNS, Annotations: annotations},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "w", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}},
	}
}

func newDirect(t *testing.T, api *apiStandIn, log logr.Logger) *DirectTransport {
	t.Helper()
	d := &DirectTransport{
		KubeTransport: &KubeTransport{Client: api.client(), Namespace: directNS, Pod: directPod, JobSet: directJobSet, Log: log},
		Token:         func() (string, error) { return directToken, nil },
		FallbackAfter: fallbackAfter,
	}
	// Before the leaders' servers close (cleanups run last first): their
	// Close waits for the connections the agent holds.
	t.Cleanup(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.client != nil {
			d.client.CloseIdleConnections()
		}
	})
	return d
}

func directContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*directWait)
	t.Cleanup(cancel)
	return ctx
}

// TestDirectReportsTheWholeState: each report PUTs the agent's whole
// state with its token, over one HTTP/2 connection, and writes nothing on
// the Pod.
func TestDirectReportsTheWholeState(t *testing.T) {
	ctx := directContext(t)
	api, leader := newAPIStandIn(t, runningPod(nil)), newLeaderStandIn(t)
	d := newDirect(t, api, testr.New(t))
	if d.observe(protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 1, Reports: leader.endpoint("s1")}) {
		t.Errorf("observe asked to say the state again before there was any")
	}
	if !d.Direct() {
		t.Fatalf("Direct() = false with an endpoint in the broadcast")
	}
	exit := protocol.WorkerExit{Epoch: 3, Container: "w", Code: 2}
	steps := []struct {
		report func() error
		want   protocol.Report
	}{
		{func() error { return d.ReportProcessEpoch(ctx, 3, 1) }, protocol.Report{JobSet: directJobSet, Epoch: 3, WorkerRestarts: 1}},
		{func() error { return d.ReportWorkerExit(ctx, exit) }, protocol.Report{JobSet: directJobSet, Epoch: 3, WorkerRestarts: 1, WorkerExit: &exit}},
		{func() error { return d.ReportReady(ctx, 3) }, protocol.Report{JobSet: directJobSet, Epoch: 3, WorkerRestarts: 1, WorkerExit: &exit, ReadyEpoch: 3}},
		{func() error { return d.ReportEpoch(ctx, 4) }, protocol.Report{JobSet: directJobSet, Epoch: 4, WorkerRestarts: 1, WorkerExit: &exit, ReadyEpoch: 3}},
	}
	for i, step := range steps {
		if err := step.report(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if diff := cmp.Diff(step.want, leader.waitPut(t)); diff != "" {
			t.Errorf("step %d: the report PUT (-want +got):\n%s", i, diff)
		}
	}
	reqs, conns := leader.requests()
	if len(reqs) != len(steps) {
		t.Errorf("the leader saw %d requests, want %d", len(reqs), len(steps))
	}
	for i, r := range reqs {
		if r.method != http.MethodPut || r.auth != "Bearer "+directToken || r.protoMajor != 2 {
			t.Errorf("request %d: %s with Authorization %q over HTTP/%d, want PUT with the bearer token over HTTP/2", i, r.method, r.auth, r.protoMajor)
		}
	}
	if conns != 1 {
		t.Errorf("the agent opened %d connections for %d reports, want 1", conns, len(steps))
	}
	if gets, patches := api.seen(); gets != 0 || len(patches) != 0 {
		t.Errorf("the agent read its Pod %d times and patched it %v, want neither", gets, patches)
	}
}

// TestDirectRefusals: a report the leader refuses as it stands is
// ErrReportRefused, no reason to fall back; one refused as behind leaves
// the agent the epoch held, which Self returns.
func TestDirectRefusals(t *testing.T) {
	cases := map[string]struct {
		status      int
		answer      protocol.ReportAnswer
		wantRefused bool
	}{
		"behind (409)":          {status: http.StatusConflict, answer: protocol.ReportAnswer{Epoch: 7, Message: "behind"}, wantRefused: true},
		"forbidden (403)":       {status: http.StatusForbidden, answer: protocol.ReportAnswer{Message: "other JobSet"}, wantRefused: true},
		"unauthenticated (401)": {status: http.StatusUnauthorized, answer: protocol.ReportAnswer{Message: "no token"}, wantRefused: true},
		"bad request (400)":     {status: http.StatusBadRequest, answer: protocol.ReportAnswer{Message: "invalid"}, wantRefused: true},
		"unavailable (503)":     {status: http.StatusServiceUnavailable, answer: protocol.ReportAnswer{Message: "cache"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := directContext(t)
			api, leader := newAPIStandIn(t, runningPod(nil)), newLeaderStandIn(t)
			leader.setAnswer(func(method string, _ protocol.Report) (int, any) {
				if method == http.MethodGet {
					// What a leader told nothing yet holds.
					return http.StatusOK, protocol.Report{JobSet: directJobSet, Epoch: 5}
				}
				return tc.status, tc.answer
			})
			d := newDirect(t, api, testr.New(t))
			d.observe(protocol.Broadcast{SyncedEpoch: 7, DeprecatedEpoch: 7, Reports: leader.endpoint("s1")})
			err := d.ReportEpoch(ctx, 6)
			if err == nil {
				t.Fatalf("ReportEpoch answered %d succeeded", tc.status)
			}
			if got := errors.Is(err, ErrReportRefused); got != tc.wantRefused {
				t.Errorf("ReportEpoch answered %d: %v; ErrReportRefused %v, want %v", tc.status, err, got, tc.wantRefused)
			}
			if !d.Direct() {
				t.Errorf("Direct() = false after one answer %d, want the agent still reporting directly", tc.status)
			}
			if _, patches := api.seen(); len(patches) != 0 {
				t.Errorf("the agent patched its Pod %v after an answer %d, want nothing", patches, tc.status)
			}
			if tc.answer.Epoch == 0 {
				return
			}
			epoch, workers, err := d.Self(ctx)
			if err != nil {
				t.Fatalf("Self: %v", err)
			}
			if epoch != tc.answer.Epoch || workers != WorkersStopped {
				t.Errorf("Self = %d, %v; want the epoch held %d, stopped", epoch, workers, tc.answer.Epoch)
			}
			if gets, _ := api.seen(); gets != 0 {
				t.Errorf("Self read the Pod %d times for a deprecated epoch, want none", gets)
			}
		})
	}
}

// TestDirectFallback: an endpoint the agent cannot reach for
// FallbackAfter, or one whose CA is unusable, has the agent report on its
// Pod, unless NoPodFallback keeps it off the Pod.
func TestDirectFallback(t *testing.T) {
	cases := map[string]struct {
		badCA         bool
		noPodFallback bool
		// wantFirstErr: the first report fails (on the way, not refused).
		wantFirstErr bool
		wantPatched  bool
	}{
		"unreachable: on the Pod after FallbackAfter":    {wantFirstErr: true, wantPatched: true},
		"unreachable, no Pod fallback: never on the Pod": {noPodFallback: true, wantFirstErr: true},
		"an unusable CA: on the Pod at once":             {badCA: true, wantPatched: true},
		"an unusable CA, no Pod fallback":                {badCA: true, noPodFallback: true, wantFirstErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := directContext(t)
			api, leader := newAPIStandIn(t, runningPod(nil)), newLeaderStandIn(t)
			d := newDirect(t, api, testr.New(t))
			d.NoPodFallback = tc.noPodFallback
			var mu sync.Mutex
			dials := 0
			d.Dial = func(context.Context, string, string) (net.Conn, error) {
				mu.Lock()
				defer mu.Unlock()
				dials++
				return nil, errors.New("blocked by a NetworkPolicy")
			}
			ep := leader.endpoint("s1")
			if tc.badCA {
				ep.CA = "not a PEM bundle"
			}
			d.observe(protocol.Broadcast{SyncedEpoch: 0, Reports: ep})

			start := time.Now()
			err := d.ReportEpoch(ctx, 1)
			if (err != nil) != tc.wantFirstErr {
				t.Fatalf("the first report: %v, want an error %v", err, tc.wantFirstErr)
			}
			if errors.Is(err, ErrReportRefused) {
				t.Errorf("the first report: %v, a refusal, want a failure on the way", err)
			}
			if _, patches := api.seen(); tc.wantFirstErr && len(patches) != 0 {
				t.Fatalf("a report that failed patched the Pod: %v", patches)
			}

			// Reported as Run reports: retried until it is taken.
			wait := directWait
			if !tc.wantPatched {
				wait = 4 * fallbackAfter
			}
			rctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			if err != nil {
				err = Retry(rctx, func(ctx context.Context) error { return d.ReportEpoch(ctx, 1) }, refused)
			}
			_, patches := api.seen()
			if !tc.wantPatched {
				if err == nil || len(patches) != 0 || !d.Direct() {
					t.Errorf("after %v: report error %v, patches %v, Direct() %v; want the report still failing, no patch, still direct",
						wait, err, patches, d.Direct())
				}
				return
			}
			if err != nil {
				t.Fatalf("the report never went on the Pod: %v", err)
			}
			if diff := cmp.Diff([]map[string]string{{jobset.EpochKey: "1"}}, patches); diff != "" {
				t.Errorf("patches of the Pod (-want +got):\n%s", diff)
			}
			if d.Direct() {
				t.Errorf("Direct() = true once reports go on the Pod")
			}
			if took := time.Since(start); !tc.badCA && took < fallbackAfter {
				t.Errorf("fell back after %v, want FallbackAfter (%v) at least", took, fallbackAfter)
			}

			// Then straight on the Pod, with no dial, until the broadcast
			// names another endpoint.
			mu.Lock()
			before := dials
			mu.Unlock()
			if err := d.ReportReady(ctx, 1); err != nil {
				t.Fatalf("ReportReady on the Pod: %v", err)
			}
			mu.Lock()
			after := dials
			mu.Unlock()
			if after != before {
				t.Errorf("a report after the fallback dialed the endpoint again (%d dials, %d before)", after, before)
			}
			if _, patches := api.seen(); len(patches) != 2 {
				t.Errorf("patches %v, want the ready epoch patched too", patches)
			}
			d.Dial = nil
			if !d.observe(protocol.Broadcast{SyncedEpoch: 0, Reports: leader.endpoint("s2")}) {
				t.Errorf("observe of a new endpoint after the fallback did not ask to say the state again")
			}
			if !d.Direct() {
				t.Errorf("Direct() = false once the broadcast names another endpoint")
			}
			if err := d.ReportEpoch(ctx, 2); err != nil {
				t.Fatalf("reporting to the new endpoint: %v", err)
			}
			if got := leader.waitPut(t); got.Epoch != 2 || got.ReadyEpoch != 1 {
				t.Errorf("the new endpoint was told %+v, want epoch 2 and readyEpoch 1", got)
			}
		})
	}
}

// TestDirectOnThePod: with no endpoint in the broadcast, or no token for
// the controller, the agent reports on its Pod and never dials.
func TestDirectOnThePod(t *testing.T) {
	cases := map[string]struct {
		noToken   bool
		broadcast func(ep protocol.ReportEndpoint) *protocol.Broadcast
	}{
		"before any broadcast": {
			broadcast: func(protocol.ReportEndpoint) *protocol.Broadcast { return nil },
		},
		"no endpoint in the broadcast": {
			broadcast: func(protocol.ReportEndpoint) *protocol.Broadcast { return &protocol.Broadcast{SyncedEpoch: 1} },
		},
		"no token: the endpoint is ignored": {
			noToken: true,
			broadcast: func(ep protocol.ReportEndpoint) *protocol.Broadcast {
				return &protocol.Broadcast{SyncedEpoch: 1, Reports: ep}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := directContext(t)
			api, leader := newAPIStandIn(t, runningPod(nil)), newLeaderStandIn(t)
			d := newDirect(t, api, testr.New(t))
			if tc.noToken {
				d.Token = nil
			}
			if b := tc.broadcast(leader.endpoint("s1")); b != nil {
				if d.observe(*b) {
					t.Errorf("observe asked to say the state again with nothing to say")
				}
			}
			if d.Direct() {
				t.Errorf("Direct() = true")
			}
			if err := d.ReportProcessEpoch(ctx, 2, 1); err != nil {
				t.Fatalf("ReportProcessEpoch: %v", err)
			}
			_, patches := api.seen()
			want := []map[string]string{{jobset.EpochKey: "2", protocol.WorkerRestartsAnnotation: "1"}}
			if diff := cmp.Diff(want, patches); diff != "" {
				t.Errorf("patches of the Pod (-want +got):\n%s", diff)
			}
			if reqs, conns := leader.requests(); len(reqs) != 0 || conns != 0 {
				t.Errorf("the leader saw %d requests on %d connections, want none", len(reqs), conns)
			}
			epoch, workers, err := d.Self(ctx)
			if err != nil || epoch != 2 || workers != WorkersRunning {
				t.Errorf("Self = %d, %v, %v; want the Pod's 2, running", epoch, workers, err)
			}
		})
	}
}

// TestDirectSaysItsStateAgain: a broadcast that names a new session (a new
// leader) has the agent say its whole state again, unasked, to the new
// leader; a broadcast of the same endpoint does not.
func TestDirectSaysItsStateAgain(t *testing.T) {
	ctx := directContext(t)
	api, first, second := newAPIStandIn(t, runningPod(nil)), newLeaderStandIn(t), newLeaderStandIn(t)
	d := newDirect(t, api, logr.Discard())
	broadcasts, err := d.Broadcasts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func() protocol.Broadcast {
		t.Helper()
		select {
		case b := <-broadcasts:
			return b
		case <-time.After(directWait):
			t.Fatal("no broadcast delivered")
			return protocol.Broadcast{}
		}
	}
	api.broadcast(t, protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 1, Reports: first.endpoint("s1")})
	if b := next(); b.Reports != first.endpoint("s1") {
		t.Fatalf("delivered %+v, want the first leader's endpoint", b.Reports)
	}
	if err := d.ReportProcessEpoch(ctx, 3, 1); err != nil {
		t.Fatalf("ReportProcessEpoch: %v", err)
	}
	want := protocol.Report{JobSet: directJobSet, Epoch: 3, WorkerRestarts: 1}
	if diff := cmp.Diff(want, first.waitPut(t)); diff != "" {
		t.Errorf("the first leader was told (-want +got):\n%s", diff)
	}

	api.broadcast(t, protocol.Broadcast{SyncedEpoch: 3, DeprecatedEpoch: 1, Reports: second.endpoint("s2")})
	if b := next(); b.Reports != second.endpoint("s2") {
		t.Fatalf("delivered %+v, want the second leader's endpoint", b.Reports)
	}
	if diff := cmp.Diff(want, second.waitPut(t)); diff != "" {
		t.Errorf("the new leader was told (-want +got):\n%s", diff)
	}
	if reqs, _ := first.requests(); len(reqs) != 1 {
		t.Errorf("the first leader saw %d requests, want the one report", len(reqs))
	}
	// The agent keeps no connection to a leader it no longer reports to.
	select {
	case <-first.closed:
	case <-time.After(directWait):
		t.Errorf("the agent kept its connection to the first leader")
	}
	if _, patches := api.seen(); len(patches) != 0 {
		t.Errorf("the agent patched its Pod %v, want nothing", patches)
	}

	// A new session at the same address, as a leader that restarted under
	// its address would broadcast: said again, on a new connection.
	api.broadcast(t, protocol.Broadcast{SyncedEpoch: 3, DeprecatedEpoch: 1, Reports: second.endpoint("s3")})
	next()
	if diff := cmp.Diff(want, second.waitPut(t)); diff != "" {
		t.Errorf("the leader's new session was told (-want +got):\n%s", diff)
	}
	if _, conns := second.requests(); conns != 2 {
		t.Errorf("the agent opened %d connections to the leader for its two sessions, want 2", conns)
	}
}

// TestDirectObserve: observe asks to say the state again only for a new
// endpoint, and only once there is a state to say.
func TestDirectObserve(t *testing.T) {
	ep := protocol.ReportEndpoint{Address: "10.0.0.1:9445", ServerName: "s", CA: "ca", Session: "s1"}
	newSession := ep
	newSession.Session = "s2"
	cases := map[string]struct {
		epoch   int32
		noToken bool
		before  *protocol.ReportEndpoint
		next    protocol.ReportEndpoint
		want    bool
	}{
		"a first endpoint, nothing said yet": {next: ep},
		"a first endpoint after a report":    {epoch: 3, next: ep, want: true},
		"the same endpoint":                  {epoch: 3, before: &ep, next: ep},
		"a new session":                      {epoch: 3, before: &ep, next: newSession, want: true},
		"a new session, nothing said yet":    {before: &ep, next: newSession},
		"no token: every endpoint is none":   {epoch: 3, noToken: true, before: &ep, next: newSession},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := &DirectTransport{KubeTransport: &KubeTransport{JobSet: directJobSet, Log: testr.New(t)}}
			if !tc.noToken {
				d.Token = func() (string, error) { return directToken, nil }
			}
			if tc.before != nil {
				d.observe(protocol.Broadcast{SyncedEpoch: 1, Reports: *tc.before})
			}
			d.state.Epoch = tc.epoch
			if got := d.observe(protocol.Broadcast{SyncedEpoch: 2, Reports: tc.next}); got != tc.want {
				t.Errorf("observe = %v, want %v", got, tc.want)
			}
			if want := !tc.next.IsZero() && !tc.noToken; d.Direct() != want {
				t.Errorf("Direct() = %v, want %v", d.Direct(), want)
			}
			if d.last.SyncedEpoch != 2 {
				t.Errorf("the broadcast noted has syncedEpoch %d, want the last one's 2", d.last.SyncedEpoch)
			}
		})
	}
}

// TestDirectSelf: an agent that starts again asks the leader; it reads
// its Pod only when the epoch held is above the deprecated one (whether
// its workers run then decides), or when the leader refuses to answer.
func TestDirectSelf(t *testing.T) {
	cases := map[string]struct {
		status      int
		held        protocol.Report
		deprecated  int32
		annotations map[string]string

		wantEpoch   int32
		wantWorkers Workers
		wantPodGets int
	}{
		"deprecated: a new epoch, no read of the Pod": {
			status: http.StatusOK, held: protocol.Report{JobSet: directJobSet, Epoch: 3}, deprecated: 3,
			wantEpoch: 3, wantWorkers: WorkersStopped,
		},
		"above the deprecated: the Pod says what the workers do": {
			status: http.StatusOK, held: protocol.Report{JobSet: directJobSet, Epoch: 3}, deprecated: 2,
			annotations: map[string]string{jobset.EpochKey: "2"},
			wantEpoch:   3, wantWorkers: WorkersRunning, wantPodGets: 1,
		},
		"above the deprecated, the Pod ahead": {
			status: http.StatusOK, held: protocol.Report{JobSet: directJobSet, Epoch: 3}, deprecated: 2,
			annotations: map[string]string{jobset.EpochKey: "4"},
			wantEpoch:   4, wantWorkers: WorkersRunning, wantPodGets: 1,
		},
		"refused by the leader: the Pod": {
			status: http.StatusForbidden, deprecated: 2,
			annotations: map[string]string{jobset.EpochKey: "2"},
			wantEpoch:   2, wantWorkers: WorkersRunning, wantPodGets: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := directContext(t)
			api, leader := newAPIStandIn(t, runningPod(tc.annotations)), newLeaderStandIn(t)
			leader.setAnswer(func(string, protocol.Report) (int, any) {
				if tc.status != http.StatusOK {
					return tc.status, protocol.ReportAnswer{Message: "refused"}
				}
				return tc.status, tc.held
			})
			d := newDirect(t, api, testr.New(t))
			d.observe(protocol.Broadcast{SyncedEpoch: tc.deprecated + 1, DeprecatedEpoch: tc.deprecated, Reports: leader.endpoint("s1")})
			epoch, workers, err := d.Self(ctx)
			if err != nil {
				t.Fatalf("Self: %v", err)
			}
			if epoch != tc.wantEpoch || workers != tc.wantWorkers {
				t.Errorf("Self = %d, %v; want %d, %v", epoch, workers, tc.wantEpoch, tc.wantWorkers)
			}
			if gets, _ := api.seen(); gets != tc.wantPodGets {
				t.Errorf("Self read the Pod %d times, want %d", gets, tc.wantPodGets)
			}
			reqs, _ := leader.requests()
			if len(reqs) != 1 || reqs[0].method != http.MethodGet || reqs[0].auth != "Bearer "+directToken || reqs[0].protoMajor != 2 {
				t.Errorf("the leader saw %+v, want one GET with the bearer token over HTTP/2", reqs)
			}
		})
	}
}

// TestDirectFallbackSaysTheStateOnThePod: an agent that reported its
// state to a leader and then must write its Pod (the next leader cannot be
// reached, or the broadcast names no endpoint any more) writes its whole
// state there: the next leader holds no report, and reads the Pod. Until
// it does, the Pod looks behind and the group's sync waits for an agent
// that has nothing new to report.
func TestDirectFallbackSaysTheStateOnThePod(t *testing.T) {
	const blocked = "192.0.2.1:9445" // TEST-NET-1: never dialed, Dial refuses it
	cases := map[string]func(first protocol.ReportEndpoint) protocol.Broadcast{
		"the next leader cannot be reached": func(first protocol.ReportEndpoint) protocol.Broadcast {
			next := first
			next.Address, next.Session = blocked, "s2"
			return protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 1, Reports: next}
		},
		"the broadcast names no endpoint any more": func(protocol.ReportEndpoint) protocol.Broadcast {
			return protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 1}
		},
	}
	for name, next := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := directContext(t)
			api, leader := newAPIStandIn(t, runningPod(nil)), newLeaderStandIn(t)
			d := newDirect(t, api, logr.Discard())
			d.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if addr == blocked {
					return nil, errors.New("blocked by a NetworkPolicy")
				}
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
			broadcasts, err := d.Broadcasts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for range broadcasts {
				}
			}()
			api.broadcast(t, protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 1, Reports: leader.endpoint("s1")})
			// Reported directly once the broadcast is observed.
			if err := Retry(ctx, func(ctx context.Context) error {
				if !d.Direct() {
					return errors.New("not observed yet")
				}
				return d.ReportProcessEpoch(ctx, 3, 1)
			}, refused); err != nil {
				t.Fatal(err)
			}
			leader.waitPut(t)
			api.broadcast(t, next(leader.endpoint("s1")))
			select {
			case got := <-api.patched:
				if got[jobset.EpochKey] != "3" || got[protocol.WorkerRestartsAnnotation] != "1" {
					t.Errorf("the Pod was patched with %v, want epoch 3 and workerRestarts 1", got)
				}
			case <-time.After(20 * fallbackAfter):
				t.Errorf("the state reported to the leader never went on the Pod (%v after the broadcast)", 20*fallbackAfter)
			}
		})
	}
}

// TestDirectRefusedTokenFallsBack: a leader that refuses the agent's
// token (the webhook and the controller configured with different
// audiences) would take nothing it says: after FallbackAfter the agent
// says its state on its Pod, as for a leader it cannot reach; a refusal
// of what it says (an epoch never broadcast) keeps it on the endpoint.
func TestDirectRefusedTokenFallsBack(t *testing.T) {
	for name, tc := range map[string]struct {
		reason      string
		wantPatched bool
	}{
		"token refused":         {reason: protocol.ReasonTokenRefused, wantPatched: true},
		"epoch never broadcast": {reason: "epoch_not_broadcast", wantPatched: false},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := directContext(t)
			api, leader := newAPIStandIn(t, runningPod(nil)), newLeaderStandIn(t)
			leader.setAnswer(func(string, protocol.Report) (int, any) {
				return http.StatusForbidden, protocol.ReportAnswer{Reason: tc.reason, Message: "refused"}
			})
			d := newDirect(t, api, testr.New(t))
			d.observe(protocol.Broadcast{Reports: leader.endpoint("s1")})
			err := d.ReportEpoch(ctx, 1)
			if !errors.Is(err, ErrReportRefused) {
				t.Fatalf("the first report: %v, want a refusal", err)
			}
			deadline := time.Now().Add(3 * d.FallbackAfter)
			for err != nil && time.Now().Before(deadline) {
				err = Retry(ctx, func(ctx context.Context) error { return d.ReportEpoch(ctx, 1) }, func(error) bool { return time.Now().After(deadline) })
			}
			_, patches := api.seen()
			if got := len(patches) > 0; got != tc.wantPatched {
				t.Errorf("patched the Pod %v (%v), want %v", got, patches, tc.wantPatched)
			}
		})
	}
}

// An agent that fell back to its Pod tries the endpoint again after
// RetryDirectAfter, at its next report: a moment out of reach does not
// keep it on its Pod for the rest of the leader's term.
func TestDirectTriesTheEndpointAgain(t *testing.T) {
	ctx := directContext(t)
	api, leader := newAPIStandIn(t, runningPod(nil)), newLeaderStandIn(t)
	d := newDirect(t, api, testr.New(t))
	d.RetryDirectAfter = 2 * fallbackAfter
	var blocked atomic.Bool
	blocked.Store(true)
	d.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if blocked.Load() {
			return nil, errors.New("blocked for a moment")
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	d.observe(protocol.Broadcast{Reports: leader.endpoint("s1")})

	rctx, cancel := context.WithTimeout(ctx, directWait)
	defer cancel()
	if err := Retry(rctx, func(ctx context.Context) error { return d.ReportEpoch(ctx, 1) }, refused); err != nil {
		t.Fatalf("the report never went on the Pod: %v", err)
	}
	if d.Direct() {
		t.Fatal("Direct() = true after the fallback")
	}
	fellBack := time.Now()
	blocked.Store(false)

	// Until RetryDirectAfter, reports go on the Pod; after it, to the
	// endpoint again.
	if err := d.ReportReady(ctx, 1); err != nil {
		t.Fatalf("ReportReady: %v", err)
	}
	if _, patches := api.seen(); len(patches) != 2 {
		t.Fatalf("patches %v, want the epoch and the ready epoch on the Pod", patches)
	}
	err := wait.PollUntilContextTimeout(ctx, fallbackAfter/4, directWait, false, func(context.Context) (bool, error) {
		return time.Since(fellBack) >= d.RetryDirectAfter, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.ReportEpoch(ctx, 2); err != nil {
		t.Fatalf("the report after RetryDirectAfter: %v", err)
	}
	if got := leader.waitPut(t); got.Epoch != 2 || got.ReadyEpoch != 1 {
		t.Errorf("the endpoint was told %+v, want epoch 2 and readyEpoch 1", got)
	}
	if !d.Direct() {
		t.Error("Direct() = false once the endpoint took a report again")
	}
	if _, patches := api.seen(); len(patches) != 2 {
		t.Errorf("patches %v: the report after RetryDirectAfter went on the Pod too", patches)
	}
}

// Each try of an endpoint still out of reach doubles the wait before the
// next, up to maxRetryWait; a report taken starts the waits afresh.
func TestDirectRetryWaitDoubles(t *testing.T) {
	d := &DirectTransport{RetryDirectAfter: time.Minute}
	for retries, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, maxRetryWait, maxRetryWait} {
		d.retries = retries
		if got := d.retryWait(); got != want {
			t.Errorf("after %d tries that fell back: wait %v, want %v", retries, got, want)
		}
	}
}
