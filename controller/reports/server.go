package reports

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/reports/token"
	"github.com/inplace-dev/inplace/webhook/certs"
)

// Verifier authenticates an agent by its projected service-account token
// (token.Verifier), locally: no TokenReview per report.
type Verifier interface {
	Verify(ctx context.Context, raw string) (token.Claims, error)
}

// Options configure a Server.
type Options struct {
	// Verifier checks the agents' tokens.
	Verifier Verifier
	// Audience is the audience the tokens are requested for, named in
	// the answer to a request without one; protocol.ReportAudience if
	// empty.
	Audience string
	// Reader reads Pods, JobSets and broadcast ConfigMaps: the manager's
	// cache, so that a report reads nothing from the API server.
	Reader client.Reader
	// Store holds the reports.
	Store *Store
	// Listen is the address the endpoint listens on (":9445").
	Listen string
	// Listener, if set, opens the endpoint's port in place of
	// net.Listen("tcp", Listen): a leader beside simulated nodes listens
	// on their in-memory Pod network.
	Listener func(addr string) (net.Listener, error)
	// Advertise is the address agents dial, host:port: the leader's own
	// (its Pod IP), as no Service selects the leader alone.
	Advertise string
	// ServerName is the name the endpoint's certificate is issued for and
	// agents check it against.
	ServerName string
	// Metrics is where the endpoint's metrics are registered.
	Metrics prometheus.Registerer
	Log     logr.Logger
}

// DefaultServerName is the name of the endpoint's certificate.
const DefaultServerName = "inplace-agent-reports"

// maxReportBytes bounds a report's body; a report is under 200 bytes.
const maxReportBytes = 4 << 10

// Bounds on what any Pod that reaches the port can make the leader hold:
// every namespace may reach it (an agent may run in any), so its
// connections, headers, streams and slow requests are bounded.
const (
	// maxConnections is above the agents of the largest cluster (one
	// connection each) and below the manager's open-file limit.
	maxConnections = 32 << 10
	// maxHeaderBytes holds a projected token (about 1 KB) many times.
	maxHeaderBytes = 16 << 10
	// maxStreams per connection: an agent sends one request at a time,
	// beside the broadcast stream it may hold.
	maxStreams = 8
)

// Server is the leader's report endpoint. Its certificate is issued at
// start by a CA of its own, made in memory for this term of leadership:
// the CA reaches the agents in the broadcast the leader writes
// (protocol.KeyReportCA), so a new leader brings its own and nothing has to
// be provisioned or rotated (the term ends long before the year the
// certificate is valid for).
type Server struct {
	opts     Options
	tls      *tls.Config
	endpoint protocol.ReportEndpoint
	results  *prometheus.CounterVec
	// streamsOpen counts the broadcast streams open (broadcast.go).
	streamsOpen prometheus.Gauge
	streams     *streams
	listener    net.Listener
	// keepAlive is how the endpoint keeps its agents' connections.
	keepAlive keepAlive
}

// keepAlive: an agent holds one connection for its life, and a restart
// must not begin with N TLS handshakes on the leader, as it would after
// any quiet spell longer than an idle timeout (10,000 agents
// reconnecting at once cost the leader seconds of CPU on the restart's
// critical path). So an idle connection is kept for a year, longer than
// any quiet spell of a training run, and one whose peer is gone (its
// node lost, no FIN) is found by an HTTP/2 ping it does not answer. A
// connection on which no agent authenticates is closed soon after it
// opens. The number of connections is bounded by maxConnections.
type keepAlive struct {
	// idle closes a connection without requests for this long.
	idle time.Duration
	// authenticate closes a connection on which no agent authenticated
	// within this long of its opening (connContext).
	authenticate time.Duration
	// ping is sent after this long without a frame from the peer, which
	// has pingTimeout to answer before its connection is closed.
	ping, pingTimeout time.Duration
	// request bounds reading a request and writing its answer, and each
	// write of a broadcast stream (which lasts as long as its agent).
	request time.Duration
}

var defaultKeepAlive = keepAlive{idle: 365 * 24 * time.Hour, authenticate: 30 * time.Second, ping: 30 * time.Second, pingTimeout: 15 * time.Second, request: 10 * time.Second}

// NewServer makes the endpoint's CA and certificate and its session.
func NewServer(opts Options) (*Server, error) {
	if opts.ServerName == "" {
		opts.ServerName = DefaultServerName
	}
	if opts.Audience == "" {
		opts.Audience = protocol.ReportAudience
	}
	if opts.Advertise == "" {
		return nil, errors.New("reports: the address agents dial is empty: set the manager's POD_IP from status.podIP, or agent.reports.advertiseAddress")
	}
	ca, err := certs.NewCA("inplace agent reports CA")
	if err != nil {
		return nil, err
	}
	// As long as the CA: a leader's term has no end of its own, and the
	// CA's key is dropped once it has signed.
	certPEM, keyPEM, err := ca.Sign(certs.Leaf{CommonName: opts.ServerName, Hosts: []string{opts.ServerName}, Lifetime: time.Until(ca.Cert.NotAfter)})
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	session := make([]byte, 8)
	if _, err := rand.Read(session); err != nil {
		return nil, err
	}
	s := &Server{
		opts:      opts,
		keepAlive: defaultKeepAlive,
		tls:       &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13, NextProtos: []string{"h2", "http/1.1"}},
		endpoint: protocol.ReportEndpoint{
			Address: opts.Advertise, ServerName: opts.ServerName, CA: string(ca.PEM), Session: hex.EncodeToString(session),
		},
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inplace_agent_reports_total",
			Help: "Requests the JobSet controller's leader received from agents, by result: a report accepted or unchanged, a read, a broadcast stream opened, or the reason it refused one.",
		}, []string{"result"}),
		streamsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inplace_agent_broadcast_streams",
			Help: "Broadcast streams the JobSet controller's leader holds open: agents started again with their Pod in place, following their JobSet's broadcast from the leader instead of watching it.",
		}),
		streams: newStreams(),
	}
	if opts.Metrics != nil {
		for _, c := range []prometheus.Collector{s.results, s.streamsOpen} {
			if err := opts.Metrics.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// Endpoint is what the leader broadcasts for its agents.
func (s *Server) Endpoint() protocol.ReportEndpoint { return s.endpoint }

// NeedLeaderElection: only the leader serves; the broadcast names its
// address.
func (s *Server) NeedLeaderElection() bool { return true }

// Listen opens the endpoint's port, and Start serves it (opening it
// first if Listen was not called): tests listen on a port of their own
// choosing before they start. The controller may broadcast the endpoint
// before the port is open; an agent that cannot reach it tries again,
// and writes its Pod after 3 s.
func (s *Server) Listen() error {
	listen := s.opts.Listener
	if listen == nil {
		listen = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	l, err := listen(s.opts.Listen)
	if err != nil {
		return fmt.Errorf("reports: listening on %s: %w", s.opts.Listen, err)
	}
	s.listener = l
	return nil
}

// Addr is the address the endpoint listens on, once Listen returned.
func (s *Server) Addr() net.Addr { return s.listener.Addr() }

// Start serves reports until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	if s.listener == nil {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	srv := &http.Server{
		Handler:           s,
		TLSConfig:         s.tls,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       s.keepAlive.request,
		WriteTimeout:      s.keepAlive.request,
		MaxHeaderBytes:    maxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: maxStreams,
			SendPingTimeout:      s.keepAlive.ping,
			PingTimeout:          s.keepAlive.pingTimeout,
		},
		IdleTimeout: s.keepAlive.idle,
		ConnContext: s.connContext,
		// Handshakes that fail (a client with another CA, a scanner) are
		// the client's business: logged at V(2), not on stderr.
		ErrorLog: log.New(logWriter{s.opts.Log.V(2)}, "", 0),
	}
	errs := make(chan error, 1)
	go func() { errs <- srv.Serve(tls.NewListener(netutil.LimitListener(s.listener, maxConnections), s.tls)) }()
	s.opts.Log.Info("serving agent reports", "listen", s.listener.Addr().String(), "advertise", s.endpoint.Address, "session", s.endpoint.Session)
	select {
	case <-ctx.Done():
		// The streams never go idle: end them first, or Shutdown waits
		// for them.
		s.streams.stop()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	case err := <-errs:
		return err
	}
}

// logWriter writes the HTTP server's own log lines to a logr.Logger.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}

// refusal is a report refused, with the status and the reason counted.
type refusal struct {
	status int
	result string
	msg    string
}

func (r *refusal) Error() string { return r.msg }

func refuse(status int, result, format string, args ...any) *refusal {
	return &refusal{status: status, result: result, msg: fmt.Sprintf(format, args...)}
}

// ServeHTTP answers PUT (a report) and GET (what is held for the Pod, which
// an agent that starts again reads instead of its Pod) on
// protocol.ReportPath, and GET on protocol.BroadcastPath (the broadcast
// stream, broadcast.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == protocol.BroadcastPath {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			s.answer(w, refuse(http.StatusMethodNotAllowed, "bad_request", "%s is not allowed: GET the broadcast", r.Method), nil)
			return
		}
		pod, claims, err := s.authenticate(r)
		if err != nil {
			s.answer(w, err, nil)
			return
		}
		s.serveBroadcast(w, r, pod, claims)
		return
	}
	if r.URL.Path != protocol.ReportPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPut && r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET, PUT")
		s.answer(w, refuse(http.StatusMethodNotAllowed, "bad_request", "%s is not allowed: PUT a report or GET what is held", r.Method), nil)
		return
	}
	pod, claims, err := s.authenticate(r)
	if err != nil {
		s.answer(w, err, nil)
		return
	}
	if r.Method == http.MethodGet {
		held := Held(pod, s.get(pod.UID))
		s.results.WithLabelValues("read").Inc()
		s.answer(w, nil, &held)
		return
	}
	var report protocol.Report
	body := http.MaxBytesReader(w, r.Body, maxReportBytes)
	if err := json.NewDecoder(body).Decode(&report); err != nil {
		s.answer(w, refuse(http.StatusBadRequest, "bad_request", "the body is not a report: %v", err), nil)
		return
	}
	if _, err := io.Copy(io.Discard, body); err != nil {
		s.answer(w, refuse(http.StatusBadRequest, "bad_request", "the body is over %d bytes or could not be read: %v", maxReportBytes, err), nil)
		return
	}
	if err := report.Validate(); err != nil {
		s.answer(w, refuse(http.StatusBadRequest, "bad_request", "invalid report: %v", err), nil)
		return
	}
	held, err := s.accept(r.Context(), pod, claims, report)
	s.answer(w, err, &held)
}

func (s *Server) get(uid types.UID) protocol.Report {
	r, _ := s.opts.Store.Get(uid)
	return r
}

// authenticate verifies the bearer's token and finds its Pod in the cache
// (the cache's own objects, read-only: a report reads them and copies
// nothing):
// the Pod the token is bound to, by name and UID, so a token outlives
// neither its Pod nor a Pod of the same name made again.
func (s *Server) authenticate(r *http.Request) (*corev1.Pod, token.Claims, error) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || raw == "" {
		return nil, token.Claims{}, refuse(http.StatusUnauthorized, protocol.ReasonUnauthenticated, "no bearer token: present the Pod's projected service-account token for audience %s", s.opts.Audience)
	}
	claims, err := s.opts.Verifier.Verify(r.Context(), raw)
	if err != nil {
		// 403, not 401: the bearer presented a token, which is refused
		// as it stands (another audience, expired, not bound to a Pod).
		s.opts.Log.V(1).Info("refused an agent's token", "error", err.Error())
		return nil, claims, refuse(http.StatusForbidden, protocol.ReasonTokenRefused,
			"the token was refused (another audience, expired, or not bound to a Pod): present the Pod's projected service-account token for the audience agent.reports.audience names, the same in the manager's and the webhook's configuration")
	}
	pod, err := s.boundPod(r.Context(), claims)
	if err != nil {
		return nil, claims, err
	}
	if c, ok := r.Context().Value(connKey{}).(*connState); ok {
		c.authenticated.Store(true)
	}
	return pod, claims, nil
}

// boundPod is the Pod the token of claims is bound to, as the cache holds
// it, while it lives: not deleted, not being deleted, not made again under
// its name.
func (s *Server) boundPod(ctx context.Context, claims token.Claims) (*corev1.Pod, error) {
	var pod corev1.Pod
	err := s.opts.Reader.Get(ctx, types.NamespacedName{Namespace: claims.Namespace, Name: claims.PodName}, &pod, client.UnsafeDisableDeepCopy)
	switch {
	case apierrors.IsNotFound(err):
		return nil, refuse(http.StatusForbidden, protocol.ReasonPodGone, "pod %s/%s, which the token is bound to, is not a JobSet's Pod or no longer exists", claims.Namespace, claims.PodName)
	case err != nil:
		return nil, refuse(http.StatusServiceUnavailable, "unavailable", "reading pod %s/%s: %v", claims.Namespace, claims.PodName, err)
	case pod.UID != claims.PodUID:
		return nil, refuse(http.StatusForbidden, protocol.ReasonPodGone, "pod %s/%s is not the Pod the token is bound to (uid %s): that one no longer exists", claims.Namespace, claims.PodName, claims.PodUID)
	case pod.DeletionTimestamp != nil:
		return nil, refuse(http.StatusForbidden, protocol.ReasonPodGone, "pod %s/%s is being deleted", claims.Namespace, claims.PodName)
	}
	return &pod, nil
}

// podJobSet is the JobSet named name that pod belongs to, by its labels
// (name and UID), as the cache holds it.
func (s *Server) podJobSet(ctx context.Context, pod *corev1.Pod, name string) (*jobset.JobSet, error) {
	if name == "" {
		return nil, refuse(http.StatusForbidden, "other_jobset", "pod %s/%s belongs to no JobSet", pod.Namespace, pod.Name)
	}
	if label := pod.Labels[jobset.JobSetNameKey]; label != name {
		return nil, refuse(http.StatusForbidden, "other_jobset", "pod %s/%s belongs to JobSet %q, not %q", pod.Namespace, pod.Name, label, name)
	}
	var js jobset.JobSet
	err := s.opts.Reader.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: name}, &js, client.UnsafeDisableDeepCopy)
	switch {
	case apierrors.IsNotFound(err):
		return nil, refuse(http.StatusForbidden, "other_jobset", "JobSet %s/%s does not exist", pod.Namespace, name)
	case err != nil:
		return nil, refuse(http.StatusServiceUnavailable, "unavailable", "reading JobSet %s/%s: %v", pod.Namespace, name, err)
	case string(js.UID) != pod.Labels[jobset.JobSetUIDKey]:
		return nil, refuse(http.StatusForbidden, "other_jobset", "pod %s/%s belongs to an earlier JobSet %s/%s", pod.Namespace, pod.Name, pod.Namespace, name)
	}
	return &js, nil
}

// connState is what the endpoint knows of a connection: whether a
// request on it has been authenticated as an agent's.
type connState struct{ authenticated atomic.Bool }

type connKey struct{}

// connContext closes a connection on which no agent has authenticated
// within keepAlive.authenticate: only an agent's connection is kept
// through quiet spells, and a client that opens connections and sends
// nothing (any Pod may reach the port) holds each for that long, not for
// keepAlive.idle.
func (s *Server) connContext(ctx context.Context, c net.Conn) context.Context {
	st := &connState{}
	time.AfterFunc(s.keepAlive.authenticate, func() {
		if !st.authenticated.Load() {
			_ = c.Close()
		}
	})
	return context.WithValue(ctx, connKey{}, st)
}

// accept checks a report against the Pod's JobSet and stores it. Refused:
// a report for another JobSet than the Pod's, and an epoch the controller
// never broadcast (above syncedEpoch + 1, where every agent starts), which
// would deprecate every lower epoch. Answered 409 with the epoch held: a
// report behind what the Pod already reported.
func (s *Server) accept(ctx context.Context, pod *corev1.Pod, _ token.Claims, report protocol.Report) (protocol.Report, error) {
	held := Held(pod, s.get(pod.UID))
	js, err := s.podJobSet(ctx, pod, report.JobSet)
	if err != nil {
		return held, err
	}
	bound := int64(s.broadcastSynced(ctx, js)) + 1
	// In a fixed order, so that a report above the bound on two counts is
	// refused for the same one every time.
	for _, f := range []struct {
		what  string
		epoch int32
	}{{"epoch", report.Epoch}, {"readyEpoch", report.ReadyEpoch}, {"workerExit.epoch", exitEpoch(report.WorkerExit)}} {
		if int64(f.epoch) > bound {
			return held, refuse(http.StatusForbidden, "epoch_not_broadcast", "%s %d was never broadcast: JobSet %s/%s is at syncedEpoch %d, and an agent reports syncedEpoch + 1 at most", f.what, f.epoch, js.Namespace, js.Name, bound-1)
		}
	}
	if report.Epoch < held.Epoch {
		return held, refuse(http.StatusConflict, "behind", "epoch %d is behind epoch %d, which pod %s/%s already reported", report.Epoch, held.Epoch, pod.Namespace, pod.Name)
	}
	stored, changed, behind := s.opts.Store.Merge(pod, report)
	switch {
	case behind:
		// Another report of the Pod, ahead of this one, was taken while
		// this one was checked.
		held = Held(pod, stored)
		return held, refuse(http.StatusConflict, "behind", "epoch %d is behind epoch %d, which pod %s/%s already reported", report.Epoch, held.Epoch, pod.Namespace, pod.Name)
	case changed:
		s.results.WithLabelValues("accepted").Inc()
	default:
		s.results.WithLabelValues("unchanged").Inc()
	}
	return Held(pod, stored), nil
}

// broadcastSynced is the highest syncedEpoch the agents may have been
// told: the status's, or the broadcast's if the cache has seen that one
// first.
func (s *Server) broadcastSynced(ctx context.Context, js *jobset.JobSet) int32 {
	synced := js.Status.SyncedEpoch
	var cm corev1.ConfigMap
	if err := s.opts.Reader.Get(ctx, types.NamespacedName{Namespace: js.Namespace, Name: protocol.BroadcastName(js.Name)}, &cm, client.UnsafeDisableDeepCopy); err == nil && metav1.IsControlledBy(&cm, js) {
		if b, err := protocol.DecodeBroadcast(cm.Data); err == nil {
			synced = max(synced, b.SyncedEpoch)
		}
	}
	return synced
}

func exitEpoch(e *protocol.WorkerExit) int32 {
	if e == nil {
		return 0
	}
	return e.Epoch
}

// answer writes the held report, or the refusal.
func (s *Server) answer(w http.ResponseWriter, err error, held *protocol.Report) {
	w.Header().Set("Content-Type", "application/json")
	var ref *refusal
	if err != nil {
		if !errors.As(err, &ref) {
			ref = refuse(http.StatusInternalServerError, "error", "%v", err)
		}
		s.results.WithLabelValues(ref.result).Inc()
		if ref.status != http.StatusConflict {
			s.opts.Log.V(1).Info("refused an agent's report", "status", ref.status, "reason", ref.msg)
		}
		w.WriteHeader(ref.status)
		a := protocol.ReportAnswer{Reason: ref.result, Message: ref.msg}
		if held != nil {
			a.Epoch = held.Epoch
		}
		_ = json.NewEncoder(w).Encode(a)
		return
	}
	_ = json.NewEncoder(w).Encode(held)
}
