package reports

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/reports/token"
)

const (
	testNS  = "ns"
	jsName  = "js"
	jsUID   = types.UID("js-uid")
	p0UID   = types.UID("p0-uid")
	synced  = int32(2) // the JobSet status's syncedEpoch
	metric  = "inplace_agent_reports_total"
	timeout = 10 * time.Second
)

// fakeVerifier verifies a token by its raw string: a name it knows gives
// that Pod's claims, any other is refused.
type fakeVerifier map[string]token.Claims

func (v fakeVerifier) Verify(_ context.Context, raw string) (token.Claims, error) {
	c, ok := v[raw]
	if !ok {
		return token.Claims{}, errors.New("token is expired")
	}
	return c, nil
}

func claimsOf(pod string, uid types.UID) token.Claims {
	return token.Claims{Namespace: testNS, ServiceAccount: "default", PodName: pod, PodUID: uid}
}

var verifier = fakeVerifier{
	"p0":       claimsOf("p0", p0UID),
	"stale":    claimsOf("p0", "p0-earlier-uid"),
	"missing":  claimsOf("nobody", "nobody-uid"),
	"earlier":  claimsOf("earlier", "earlier-uid"),
	"deleting": claimsOf("deleting", "deleting-uid"),
	"orphan":   claimsOf("orphan", "orphan-uid"),
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(jobset.AddToScheme(s))
	return s
}

// world is what the cache holds: a JobSet, its broadcast and Pods.
type world struct {
	jobSet    *jobset.JobSet
	broadcast *corev1.ConfigMap
	pods      map[string]*corev1.Pod
}

func newWorld() *world {
	js := &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: jsName, Namespace: testNS, UID: jsUID},
		Status:     jobset.JobSetStatus{SyncedEpoch: synced, DeprecatedEpoch: synced - 1},
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: protocol.BroadcastName(jsName), Namespace: testNS,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, jobset.GroupVersion.WithKind("JobSet"))},
		},
		Data: protocol.EncodeBroadcast(protocol.Broadcast{SyncedEpoch: synced, DeprecatedEpoch: synced - 1}),
	}
	pod := func(name string, uid types.UID, jobSet string, jobSetUID types.UID) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNS, UID: uid,
			Labels: map[string]string{jobset.JobSetNameKey: jobSet, jobset.JobSetUIDKey: string(jobSetUID)},
		}}
	}
	deleting := pod("deleting", "deleting-uid", jsName, jsUID)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{"test/keep"}
	return &world{jobSet: js, broadcast: cm, pods: map[string]*corev1.Pod{
		"p0":       pod("p0", p0UID, jsName, jsUID),
		"earlier":  pod("earlier", "earlier-uid", jsName, "js-earlier-uid"),
		"deleting": deleting,
		"orphan":   pod("orphan", "orphan-uid", "gone", "gone-uid"),
	}}
}

func (w *world) reader(t *testing.T) client.Reader {
	t.Helper()
	objs := []client.Object{w.jobSet}
	if w.broadcast != nil {
		objs = append(objs, w.broadcast)
	}
	for _, p := range w.pods {
		objs = append(objs, p)
	}
	return fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(objs...).Build()
}

// fixture is a Server on a world, with what it told OnChange and counted.
type fixture struct {
	srv   *Server
	store *Store
	reg   *prometheus.Registry

	mu      sync.Mutex
	changes []change
}

func newFixture(t *testing.T, r client.Reader) *fixture {
	t.Helper()
	f := &fixture{store: NewStore(), reg: prometheus.NewRegistry()}
	f.store.OnChange(func(pod *corev1.Pod, old, cur protocol.Report) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.changes = append(f.changes, change{pod.UID, old, cur})
	})
	srv, err := NewServer(Options{
		Verifier: verifier, Reader: r, Store: f.store,
		Listen: "127.0.0.1:0", Advertise: "127.0.0.1:0", Metrics: f.reg, Log: testr.New(t),
	})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	f.srv = srv
	return f
}

// request is one request to the endpoint: a bearer token ("" for none,
// unless authorization sets the header itself) and a body.
type request struct {
	method        string
	path          string
	token         string
	authorization string
	body          string
}

func put(tok string, r protocol.Report) request {
	b, _ := json.Marshal(r)
	return request{method: http.MethodPut, token: tok, body: string(b)}
}

func (f *fixture) serve(ctx context.Context, req request) *httptest.ResponseRecorder {
	if req.path == "" {
		req.path = protocol.ReportPath
	}
	r := httptest.NewRequestWithContext(ctx, req.method, req.path, strings.NewReader(req.body))
	switch {
	case req.authorization != "":
		r.Header.Set("Authorization", req.authorization)
	case req.token != "":
		r.Header.Set("Authorization", "Bearer "+req.token)
	}
	w := httptest.NewRecorder()
	f.srv.ServeHTTP(w, r)
	return w
}

func (f *fixture) do(t *testing.T, req request) *httptest.ResponseRecorder {
	t.Helper()
	return f.serve(context.Background(), req)
}

// results is what inplace_agent_reports_total counts, by result, as the
// registry the server was given gathers it.
func (f *fixture) results(t *testing.T) map[string]float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatalf("gathering the metrics: %v", err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}

func (f *fixture) changed() []change {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]change(nil), f.changes...)
}

func answerOf(t *testing.T, w *httptest.ResponseRecorder) protocol.ReportAnswer {
	t.Helper()
	var a protocol.ReportAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatalf("the answer %q is not JSON: %v", w.Body.String(), err)
	}
	return a
}

func heldOf(t *testing.T, w *httptest.ResponseRecorder) protocol.Report {
	t.Helper()
	var r protocol.Report
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		t.Fatalf("the answer %q is not JSON: %v", w.Body.String(), err)
	}
	return r
}

// TestServerReport: one request to a fresh leader, refused or taken. A
// refused report stores nothing and tells OnChange nothing; every answer
// is counted by its result.
func TestServerReport(t *testing.T) {
	long := protocol.Report{JobSet: strings.Repeat("j", maxReportBytes+1), Epoch: 1}
	cases := map[string]struct {
		world   func(*world)
		request request

		wantStatus  int
		wantResults map[string]float64
		// wantStored is the report held for p0 afterwards; nil: none.
		wantStored *protocol.Report
		wantEpoch  int32
	}{
		"no bearer": {
			request:     put("", protocol.Report{JobSet: jsName, Epoch: 3}),
			wantStatus:  http.StatusUnauthorized,
			wantResults: map[string]float64{"unauthenticated": 1},
		},
		"another scheme": {
			request:     request{method: http.MethodPut, authorization: "Basic cDA6cDA=", body: `{"jobSet":"js","epoch":3}`},
			wantStatus:  http.StatusUnauthorized,
			wantResults: map[string]float64{"unauthenticated": 1},
		},
		"an empty bearer": {
			request:     request{method: http.MethodPut, authorization: "Bearer ", body: `{"jobSet":"js","epoch":3}`},
			wantStatus:  http.StatusUnauthorized,
			wantResults: map[string]float64{"unauthenticated": 1},
		},
		"GET without a bearer": {
			request:     request{method: http.MethodGet},
			wantStatus:  http.StatusUnauthorized,
			wantResults: map[string]float64{"unauthenticated": 1},
		},
		"a token the verifier refuses": {
			request:     put("expired", protocol.Report{JobSet: jsName, Epoch: 3}),
			wantStatus:  http.StatusForbidden,
			wantResults: map[string]float64{"token_refused": 1},
		},
		"a token for a Pod not in the cache": {
			request:     put("missing", protocol.Report{JobSet: jsName, Epoch: 3}),
			wantStatus:  http.StatusForbidden,
			wantResults: map[string]float64{"pod_gone": 1},
		},
		"a token for an earlier Pod of the name": {
			request:     put("stale", protocol.Report{JobSet: jsName, Epoch: 3}),
			wantStatus:  http.StatusForbidden,
			wantResults: map[string]float64{"pod_gone": 1},
		},
		"a Pod being deleted": {
			request:     put("deleting", protocol.Report{JobSet: jsName, Epoch: 3}),
			wantStatus:  http.StatusForbidden,
			wantResults: map[string]float64{"pod_gone": 1},
		},
		"a report for another JobSet": {
			request:     put("p0", protocol.Report{JobSet: "other", Epoch: 3}),
			wantStatus:  http.StatusForbidden,
			wantResults: map[string]float64{"other_jobset": 1},
		},
		"a Pod of an earlier JobSet of the name": {
			request:     put("earlier", protocol.Report{JobSet: jsName, Epoch: 3}),
			wantStatus:  http.StatusForbidden,
			wantResults: map[string]float64{"other_jobset": 1},
		},
		"a Pod whose JobSet is gone": {
			request:     put("orphan", protocol.Report{JobSet: "gone", Epoch: 1}),
			wantStatus:  http.StatusForbidden,
			wantResults: map[string]float64{"other_jobset": 1},
		},
		"an epoch never broadcast": {
			request:     put("p0", protocol.Report{JobSet: jsName, Epoch: synced + 2}),
			wantStatus:  http.StatusForbidden,
			wantResults: map[string]float64{"epoch_not_broadcast": 1},
		},
		"a readyEpoch never broadcast": {
			request:     put("p0", protocol.Report{JobSet: jsName, Epoch: synced + 1, ReadyEpoch: synced + 2}),
			wantStatus:  http.StatusForbidden,
			wantResults: map[string]float64{"epoch_not_broadcast": 1},
		},
		"a workerExit epoch never broadcast": {
			request:     put("p0", protocol.Report{JobSet: jsName, Epoch: synced + 1, WorkerExit: exitAt(synced+2, "w", 1)}),
			wantStatus:  http.StatusForbidden,
			wantResults: map[string]float64{"epoch_not_broadcast": 1},
		},
		"syncedEpoch + 1, where every agent starts": {
			request:     put("p0", protocol.Report{JobSet: jsName, Epoch: synced + 1, ReadyEpoch: synced + 1, WorkerExit: exitAt(synced+1, "w", 1)}),
			wantStatus:  http.StatusOK,
			wantResults: map[string]float64{"accepted": 1},
			wantStored:  &protocol.Report{JobSet: jsName, Epoch: synced + 1, ReadyEpoch: synced + 1, WorkerExit: exitAt(synced+1, "w", 1)},
			wantEpoch:   synced + 1,
		},
		"the broadcast ahead of the status raises the bound": {
			world: func(w *world) {
				w.broadcast.Data = protocol.EncodeBroadcast(protocol.Broadcast{SyncedEpoch: synced + 2, DeprecatedEpoch: synced + 1})
			},
			request:     put("p0", protocol.Report{JobSet: jsName, Epoch: synced + 3}),
			wantStatus:  http.StatusOK,
			wantResults: map[string]float64{"accepted": 1},
			wantStored:  &protocol.Report{JobSet: jsName, Epoch: synced + 3},
			wantEpoch:   synced + 3,
		},
		"a broadcast the JobSet does not control raises nothing": {
			world: func(w *world) {
				w.broadcast.Data = protocol.EncodeBroadcast(protocol.Broadcast{SyncedEpoch: synced + 2, DeprecatedEpoch: synced + 1})
				w.broadcast.OwnerReferences[0].UID = "js-earlier-uid"
			},
			request:     put("p0", protocol.Report{JobSet: jsName, Epoch: synced + 3}),
			wantStatus:  http.StatusForbidden,
			wantResults: map[string]float64{"epoch_not_broadcast": 1},
		},
		"no broadcast: the status's bound": {
			world:       func(w *world) { w.broadcast = nil },
			request:     put("p0", protocol.Report{JobSet: jsName, Epoch: synced + 1}),
			wantStatus:  http.StatusOK,
			wantResults: map[string]float64{"accepted": 1},
			wantStored:  &protocol.Report{JobSet: jsName, Epoch: synced + 1},
			wantEpoch:   synced + 1,
		},
		"a body that is no JSON": {
			request:     request{method: http.MethodPut, token: "p0", body: `{"jobSet":`},
			wantStatus:  http.StatusBadRequest,
			wantResults: map[string]float64{"bad_request": 1},
		},
		"a report that names no JobSet": {
			request:     request{method: http.MethodPut, token: "p0", body: `{"epoch":1}`},
			wantStatus:  http.StatusBadRequest,
			wantResults: map[string]float64{"bad_request": 1},
		},
		"a negative epoch": {
			request:     put("p0", protocol.Report{JobSet: jsName, Epoch: -1}),
			wantStatus:  http.StatusBadRequest,
			wantResults: map[string]float64{"bad_request": 1},
		},
		"a body over 4 KiB": {
			request:     put("p0", long),
			wantStatus:  http.StatusBadRequest,
			wantResults: map[string]float64{"bad_request": 1},
		},
		"POST": {
			request:     request{method: http.MethodPost, token: "p0", body: `{"jobSet":"js","epoch":3}`},
			wantStatus:  http.StatusMethodNotAllowed,
			wantResults: map[string]float64{"bad_request": 1},
		},
		"another path": {
			request:     request{method: http.MethodPut, path: "/v1alpha1/other", token: "p0", body: `{"jobSet":"js","epoch":3}`},
			wantStatus:  http.StatusNotFound,
			wantResults: map[string]float64{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld()
			if tc.world != nil {
				tc.world(w)
			}
			f := newFixture(t, w.reader(t))
			got := f.do(t, tc.request)
			if got.Code != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", got.Code, strings.TrimSpace(got.Body.String()), tc.wantStatus)
			}
			if diff := cmp.Diff(tc.wantResults, f.results(t)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", metric, diff)
			}
			stored, ok := f.store.Get(p0UID)
			switch {
			case tc.wantStored == nil && (ok || f.store.Len() != 0):
				t.Errorf("stored %+v (%d reports), want nothing", stored, f.store.Len())
			case tc.wantStored != nil && !ok:
				t.Errorf("stored nothing, want %+v", *tc.wantStored)
			case tc.wantStored != nil:
				if diff := cmp.Diff(*tc.wantStored, stored); diff != "" {
					t.Errorf("stored (-want +got):\n%s", diff)
				}
			}
			changes := f.changed()
			switch {
			case tc.wantStored == nil && len(changes) != 0:
				t.Errorf("OnChange told %+v, want nothing", changes)
			case tc.wantStored != nil:
				want := []change{{p0UID, protocol.Report{}, *tc.wantStored}}
				if diff := cmp.Diff(want, changes, cmp.AllowUnexported(change{})); diff != "" {
					t.Errorf("OnChange calls (-want +got):\n%s", diff)
				}
			}
			switch tc.wantStatus {
			case http.StatusOK:
				if got := heldOf(t, got); got.Epoch != tc.wantEpoch {
					t.Errorf("answered epoch %d, want %d", got.Epoch, tc.wantEpoch)
				}
			case http.StatusNotFound:
			default:
				if a := answerOf(t, got); a.Message == "" {
					t.Errorf("a refusal without a message: %s", got.Body.String())
				}
			}
			if tc.wantStatus == http.StatusMethodNotAllowed && got.Header().Get("Allow") != "GET, PUT" {
				t.Errorf("Allow: %q, want %q", got.Header().Get("Allow"), "GET, PUT")
			}
		})
	}
}

// TestServerReportBehind: a report behind the epoch held for the Pod, in
// the store or on the Pod (an agent that fell back wrote it), is refused
// with 409 and the epoch held, which the agent goes on from.
func TestServerReportBehind(t *testing.T) {
	cases := map[string]struct {
		annotations map[string]string
		before      []protocol.Report
		wantStored  *protocol.Report
	}{
		"held in the store": {
			before:     []protocol.Report{{JobSet: jsName, Epoch: 3}},
			wantStored: &protocol.Report{JobSet: jsName, Epoch: 3},
		},
		"held on the Pod": {
			annotations: map[string]string{jobset.EpochKey: "3"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld()
			w.pods["p0"].Annotations = tc.annotations
			f := newFixture(t, w.reader(t))
			for _, r := range tc.before {
				if got := f.do(t, put("p0", r)); got.Code != http.StatusOK {
					t.Fatalf("reporting %+v: status %d (%s)", r, got.Code, got.Body.String())
				}
			}
			before := f.results(t)
			got := f.do(t, put("p0", protocol.Report{JobSet: jsName, Epoch: 2}))
			if got.Code != http.StatusConflict {
				t.Fatalf("status %d (%s), want 409", got.Code, got.Body.String())
			}
			if a := answerOf(t, got); a.Epoch != 3 || a.Message == "" {
				t.Errorf("answer %+v, want epoch 3 with a message", a)
			}
			if n := f.results(t)["behind"] - before["behind"]; n != 1 {
				t.Errorf("%s{result=behind} rose by %v, want 1", metric, n)
			}
			stored, ok := f.store.Get(p0UID)
			if tc.wantStored == nil && ok {
				t.Errorf("stored %+v, want nothing", stored)
			}
			if tc.wantStored != nil && !cmp.Equal(*tc.wantStored, stored) {
				t.Errorf("stored %+v, want %+v", stored, *tc.wantStored)
			}
			if n := len(f.changed()); n != len(tc.before) {
				t.Errorf("OnChange told %d times, want %d", n, len(tc.before))
			}
		})
	}
}

// TestServerReportAgain: a report said again (a new session, a retry) is
// answered 200 and changes nothing; counts and exits never go down, even
// when an agent that started again lost them.
func TestServerReportAgain(t *testing.T) {
	f := newFixture(t, newWorld().reader(t))
	full := protocol.Report{JobSet: jsName, Epoch: 3, WorkerRestarts: 2, ReadyEpoch: 3, WorkerExit: exitAt(3, "w", 1)}
	steps := []struct {
		report protocol.Report
		want   protocol.Report
	}{
		{full, full},
		// Said again.
		{full, full},
		// An agent that started again and lost its count and exit.
		{protocol.Report{JobSet: jsName, Epoch: 3}, full},
		// An earlier exit and a lower count.
		{protocol.Report{JobSet: jsName, Epoch: 3, WorkerRestarts: 1, WorkerExit: exitAt(2, "v", 4)}, full},
	}
	for i, step := range steps {
		got := f.do(t, put("p0", step.report))
		if got.Code != http.StatusOK {
			t.Fatalf("step %d: status %d (%s), want 200", i, got.Code, got.Body.String())
		}
		if diff := cmp.Diff(step.want, heldOf(t, got)); diff != "" {
			t.Errorf("step %d: answer (-want +got):\n%s", i, diff)
		}
		stored, _ := f.store.Get(p0UID)
		if diff := cmp.Diff(step.want, stored); diff != "" {
			t.Errorf("step %d: stored (-want +got):\n%s", i, diff)
		}
	}
	if diff := cmp.Diff(map[string]float64{"accepted": 1, "unchanged": 3}, f.results(t)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", metric, diff)
	}
	if diff := cmp.Diff([]change{{p0UID, protocol.Report{}, full}}, f.changed(), cmp.AllowUnexported(change{})); diff != "" {
		t.Errorf("OnChange calls (-want +got):\n%s", diff)
	}

	// A later exit replaces the one held; the count rises.
	later := protocol.Report{JobSet: jsName, Epoch: 3, WorkerRestarts: 3, ReadyEpoch: 3, WorkerExit: exitAt(3, "v", 2)}
	if got := f.do(t, put("p0", later)); got.Code != http.StatusOK {
		t.Fatalf("status %d (%s), want 200", got.Code, got.Body.String())
	}
	if stored, _ := f.store.Get(p0UID); !cmp.Equal(later, stored) {
		t.Errorf("stored %+v, want %+v", stored, later)
	}
}

// TestServerGet: an agent that starts again reads what is held for its
// Pod: the report merged with the Pod's annotations.
func TestServerGet(t *testing.T) {
	cases := map[string]struct {
		annotations map[string]string
		held        *protocol.Report
		want        protocol.Report
	}{
		"nothing": {
			want: protocol.Report{JobSet: jsName},
		},
		"the Pod's annotations alone": {
			annotations: map[string]string{jobset.EpochKey: "2", protocol.WorkerExitAnnotation: "2:w:3"},
			want:        protocol.Report{JobSet: jsName, Epoch: 2, WorkerExit: exitAt(2, "w", 3)},
		},
		"merged": {
			annotations: map[string]string{jobset.EpochKey: "2", protocol.WorkerRestartsAnnotation: "4"},
			held:        &protocol.Report{JobSet: jsName, Epoch: 3, WorkerRestarts: 1, ReadyEpoch: 3},
			want:        protocol.Report{JobSet: jsName, Epoch: 3, WorkerRestarts: 4, ReadyEpoch: 3},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld()
			w.pods["p0"].Annotations = tc.annotations
			f := newFixture(t, w.reader(t))
			if tc.held != nil {
				f.store.Put(w.pods["p0"], *tc.held)
			}
			got := f.do(t, request{method: http.MethodGet, token: "p0"})
			if got.Code != http.StatusOK {
				t.Fatalf("status %d (%s), want 200", got.Code, got.Body.String())
			}
			if diff := cmp.Diff(tc.want, heldOf(t, got)); diff != "" {
				t.Errorf("GET (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]float64{"read": 1}, f.results(t)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", metric, diff)
			}
		})
	}
}

// TestServerPaddedBodyOver4KiB: a body over 4 KiB is refused even when
// it begins with a whole report: the bound is the body's, not the first
// JSON value's.
func TestServerPaddedBodyOver4KiB(t *testing.T) {
	f := newFixture(t, newWorld().reader(t))
	body := `{"jobSet":"js","epoch":3}` + strings.Repeat(" ", 2*maxReportBytes)
	got := f.do(t, request{method: http.MethodPut, token: "p0", body: body})
	if got.Code != http.StatusBadRequest {
		t.Errorf("status %d (%s), want 400", got.Code, strings.TrimSpace(got.Body.String()))
	}
	if r, ok := f.store.Get(p0UID); ok {
		t.Errorf("stored %+v, want nothing", r)
	}
}

// pausingReader holds a request whose context carries pauseKey at its
// read of the JobSet, until released.
type pausingReader struct {
	client.Reader
	arrived, release chan struct{}
}

type pauseKey struct{}

func (r *pausingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*jobset.JobSet); ok && ctx.Value(pauseKey{}) != nil {
		r.arrived <- struct{}{}
		<-r.release
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestServerEpochNeverGoesDown: a report that was on its way while a later
// one was taken (the agent's request timed out and it sent the next) does
// not take the epoch held back down.
func TestServerEpochNeverGoesDown(t *testing.T) {
	r := &pausingReader{Reader: newWorld().reader(t), arrived: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, r)
	if got := f.do(t, put("p0", protocol.Report{JobSet: jsName, Epoch: 1})); got.Code != http.StatusOK {
		t.Fatalf("status %d (%s), want 200", got.Code, got.Body.String())
	}
	slow := make(chan int, 1)
	go func() {
		ctx := context.WithValue(context.Background(), pauseKey{}, true)
		slow <- f.serve(ctx, put("p0", protocol.Report{JobSet: jsName, Epoch: 2})).Code
	}()
	select {
	case <-r.arrived:
	case <-time.After(timeout):
		t.Fatal("the slow report never read the JobSet")
	}
	if got := f.do(t, put("p0", protocol.Report{JobSet: jsName, Epoch: 3})); got.Code != http.StatusOK {
		t.Fatalf("status %d (%s), want 200", got.Code, got.Body.String())
	}
	close(r.release)
	select {
	case code := <-slow:
		t.Logf("the slow report of epoch 2 was answered %d", code)
	case <-time.After(timeout):
		t.Fatal("the slow report was never answered")
	}
	if stored, _ := f.store.Get(p0UID); stored.Epoch != 3 {
		t.Errorf("epoch held %d after reports of 3 then (late) 2, want 3", stored.Epoch)
	}
	for _, c := range f.changed() {
		if c.cur.Epoch < c.old.Epoch {
			t.Errorf("OnChange told an epoch going down: %d to %d", c.old.Epoch, c.cur.Epoch)
		}
	}
}

// TestServerEndpoint: the endpoint serves TLS with a certificate the CA in
// Endpoint verifies for its ServerName (and no other name), negotiates
// HTTP/2, and stops when its context ends. Each server has its own CA
// and session.
func TestServerEndpoint(t *testing.T) {
	f := newFixture(t, newWorld().reader(t))
	ep := f.srv.Endpoint()
	if ep.Address != "127.0.0.1:0" || ep.ServerName != DefaultServerName || len(ep.Session) != 16 {
		t.Errorf("Endpoint() = {Address: %q, ServerName: %q, Session: %q}, want the advertised address, %q and 8 bytes in hex",
			ep.Address, ep.ServerName, ep.Session, DefaultServerName)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(ep.CA)) {
		t.Fatalf("Endpoint().CA holds no PEM certificate: %q", ep.CA)
	}

	if err := f.srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.srv.Start(ctx) }()
	addr := f.srv.Addr().String()

	dial := func(cfg *tls.Config) (*tls.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", addr, cfg)
	}
	conn, err := dial(&tls.Config{RootCAs: pool, ServerName: ep.ServerName, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatalf("handshake for %s with the endpoint's CA: %v", ep.ServerName, err)
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Errorf("ALPN negotiated %q, want h2", p)
	}
	_ = conn.Close()

	refused := map[string]*tls.Config{
		"another server name":  {RootCAs: pool, ServerName: "example.com", MinVersion: tls.VersionTLS13},
		"the system's roots":   {ServerName: ep.ServerName, MinVersion: tls.VersionTLS13},
		"another server's CA":  {RootCAs: otherCA(t), ServerName: ep.ServerName, MinVersion: tls.VersionTLS13},
		"no TLS 1.3 (TLS 1.2)": {RootCAs: pool, ServerName: ep.ServerName, MaxVersion: tls.VersionTLS12},
	}
	for name, cfg := range refused {
		if conn, err := dial(cfg); err == nil {
			_ = conn.Close()
			t.Errorf("%s: handshake succeeded, want it refused", name)
		}
	}

	// A request over HTTP/2 reaches the Server's handler.
	c := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: ep.ServerName, MinVersion: tls.VersionTLS13}, ForceAttemptHTTP2: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+protocol.ReportPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer p0")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Errorf("GET over TLS: %s %s, want 200 over HTTP/2", resp.Proto, resp.Status)
	}
	c.CloseIdleConnections()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start returned %v once its context ended, want nil", err)
		}
	case <-time.After(timeout):
		t.Fatal("Start did not return once its context ended")
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Errorf("the endpoint still listens after Start returned")
	}
}

// otherCA is the CA of another server, which must not verify this one's
// certificate.
func otherCA(t *testing.T) *x509.CertPool {
	t.Helper()
	f := newFixture(t, newWorld().reader(t))
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(f.srv.Endpoint().CA)) {
		t.Fatal("another server's CA holds no PEM certificate")
	}
	return pool
}

// TestNewServerNeedsAnAddress: agents cannot be told where to report
// without an address to advertise.
func TestNewServerNeedsAnAddress(t *testing.T) {
	if _, err := NewServer(Options{Verifier: verifier, Store: NewStore()}); err == nil {
		t.Error("NewServer without Advertise succeeded, want an error")
	}
	a := newFixture(t, newWorld().reader(t)).srv.Endpoint()
	b := newFixture(t, newWorld().reader(t)).srv.Endpoint()
	if a.Session == b.Session || a.CA == b.CA {
		t.Errorf("two servers share a session (%v) or a CA (%v), want each its own", a.Session == b.Session, a.CA == b.CA)
	}
}

// Any Pod may reach the port: the server bounds the headers it reads, and
// says so in its HTTP/2 settings, over TLS 1.3 and HTTP/2 as agents speak
// it.
func TestServerBoundsHeaders(t *testing.T) {
	f := newFixture(t, newWorld().reader(t))
	tlsConfig := startServer(t, f)
	ctx := context.Background()
	h1Config := tlsConfig.Clone()
	h1Config.NextProtos = []string{"http/1.1"}
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}, Timeout: 10 * time.Second}
	// A client that does not keep to the bound it is told: HTTP/1.1,
	// whose server reads the headers before it refuses them.
	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: h1Config, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}, Timeout: 10 * time.Second}
	// One request first, so that the HTTP/2 client holds the server's
	// settings, its bound among them, before the cases run in whatever
	// order: a request sent before they arrive is refused by the
	// server's decoder with the whole connection (GOAWAY), not with 431.
	warm, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+f.srv.Addr().String()+protocol.ReportPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h2.Do(warm)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	resp.Body.Close()
	for name, tc := range map[string]struct {
		client     *http.Client
		header     int
		wantStatus int
		wantProto  int
	}{
		"a token's size":                      {client: h2, header: 2 << 10, wantStatus: http.StatusUnauthorized, wantProto: 2},
		"beyond the server's bound, HTTP/2":   {client: h2, header: maxHeaderBytes + 4<<10, wantStatus: http.StatusRequestHeaderFieldsTooLarge, wantProto: 2},
		"beyond the server's bound, HTTP/1.1": {client: h1, header: maxHeaderBytes + 4<<10, wantStatus: http.StatusRequestHeaderFieldsTooLarge, wantProto: 1},
	} {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+f.srv.Addr().String()+protocol.ReportPath, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Padding", strings.Repeat("a", tc.header))
			resp, err := tc.client.Do(req)
			if err != nil && tc.wantStatus == http.StatusRequestHeaderFieldsTooLarge && strings.Contains(err.Error(), "larger than peer's advertised limit") {
				// The server told its bound in its HTTP/2 settings, and
				// the client kept to it.
				return
			}
			if err != nil {
				t.Fatalf("GET: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus || resp.ProtoMajor != tc.wantProto {
				t.Errorf("status %d over %s, want %d over HTTP/%d", resp.StatusCode, resp.Proto, tc.wantStatus, tc.wantProto)
			}
		})
	}
}
