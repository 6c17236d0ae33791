package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/inplace-dev/inplace/api/protocol"
)

// DirectTransport reports to the JobSet controller's leader over HTTPS,
// where the broadcast names its endpoint (protocol.ReportEndpoint), instead
// of writing the Pod: an in-place restart of N Pods then costs the API
// server no write per Pod. It wraps a KubeTransport, which still delivers
// the broadcast (one object, fanned out by the watch cache) and is the
// fallback: with no endpoint in the broadcast (an older manager, direct
// reports off) or one the agent cannot reach for FallbackAfter (a
// NetworkPolicy, say), the agent writes its Pod as before, until the
// broadcast names a new endpoint.
//
// Each report is the agent's whole state (protocol.Report), so saying it
// again is always right: the agent says it again whenever the broadcast
// names a new session, a new leader's, which knows nothing of what the
// last one was told. The connection is one, kept for the agent's life
// (HTTP/2), with the server checked against the CA the broadcast carries.
type DirectTransport struct {
	*KubeTransport
	// Token returns the Pod's projected service-account token for the
	// controller's audience; the kubelet refreshes the file it is read
	// from (TokenFile).
	Token func() (string, error)
	// Dial, if set, dials the endpoint (the simulated nodes count their
	// connections); nil means a net.Dialer's.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// FallbackAfter is how long reports to an endpoint may fail on the
	// way before the agent writes its Pod instead; 0 means
	// DefaultFallbackAfter.
	FallbackAfter time.Duration
	// NoPodFallback keeps reports off the Pod: the agents' Role may not
	// allow the write (agent.reports.podFallback: false). The agent then
	// retries the endpoint until it answers.
	NoPodFallback bool
	// RetryDirectAfter is how long after falling back to the Pod the
	// agent tries the endpoint again, at its next report: an endpoint
	// that was out of reach for a moment (a leader's cache behind, a
	// network blip) is not given up for the rest of the leader's term.
	// 0 means DefaultRetryDirectAfter.
	RetryDirectAfter time.Duration
	// Memory, if set, keeps the endpoint the broadcast names across
	// restarts of the agent's container (EndpointFile).
	Memory EndpointMemory

	mu       sync.Mutex
	endpoint protocol.ReportEndpoint
	last     protocol.Broadcast
	client   *http.Client
	// failing is when reports to the endpoint began to fail on the way;
	// zero while they succeed.
	failing time.Time
	// fallback: the endpoint could not be reached; reports go on the Pod
	// until the broadcast names another one, or RetryDirectAfter from
	// fellBack. fellBack is zero where the endpoint is unusable as it
	// stands (its CA): never tried again.
	fallback bool
	fellBack time.Time
	// retries counts the tries of the endpoint after a fallback that fell
	// back again: each doubles the wait before the next (retryWait), so an
	// endpoint that stays out of reach costs a report its wait rarely.
	retries int
	retried bool
	state   protocol.Report
	// held is the epoch the controller holds for the Pod, when it refused
	// a report as behind it.
	held int32
	// send serializes reports, so that a report said again after a new
	// session never overtakes a newer one.
	send sync.Mutex
}

// DefaultFallbackAfter: a leader that moved is reached again within about
// a second (its successor broadcasts its endpoint); an endpoint that
// cannot be reached for longer is taken as blocked.
const DefaultFallbackAfter = 3 * time.Second

// DefaultRetryDirectAfter: an agent that fell back tries the endpoint
// again at most this often, each try costing a report up to
// FallbackAfter when the endpoint is still out of reach.
const DefaultRetryDirectAfter = 30 * time.Second

// reportTimeout bounds one report: the endpoint answers from memory.
const reportTimeout = 5 * time.Second

var (
	_ Transport        = &DirectTransport{}
	_ ProcessTransport = &DirectTransport{}
)

// TokenFile returns a Token that reads the projected token at path.
func TokenFile(path string) func() (string, error) {
	return func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("reading the report token: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
}

// errNotDirect: the report goes on the Pod.
var errNotDirect = errors.New("no endpoint to report to")

// Broadcasts delivers the broadcasts and notes the endpoint each names; a
// new session has the agent's state said again.
//
// At its first start the agent watches the broadcast ConfigMap
// (KubeTransport). Once started again in a Pod restarted in place, with
// an endpoint remembered (Memory), it reads the broadcast from that
// endpoint instead (followLeader): a container-scope restart of N Pods
// then costs the API server no watch per agent.
func (d *DirectTransport) Broadcasts(ctx context.Context) (<-chan protocol.Broadcast, error) {
	var in <-chan protocol.Broadcast
	if ep, ok := d.recall(); ok {
		in = d.followLeader(ctx, ep)
	} else {
		var err error
		if in, err = d.KubeTransport.Broadcasts(ctx); err != nil {
			return nil, err
		}
	}
	out := make(chan protocol.Broadcast, 1)
	go func() {
		defer close(out)
		for b := range in {
			if d.observe(b) {
				go d.sayAgain(ctx, b.Reports.Session)
			}
			select {
			case out <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// recall returns the endpoint remembered from an earlier run of the
// agent's container, if it may report directly.
func (d *DirectTransport) recall() (protocol.ReportEndpoint, bool) {
	if d.Memory == nil || d.Token == nil {
		return protocol.ReportEndpoint{}, false
	}
	return d.Memory.Recall()
}

// remember keeps the endpoint the broadcast names now for the next run of
// the agent's container. Told of each change only (observe): the endpoint
// this run followed from Memory is not written again.
func (d *DirectTransport) remember(ep protocol.ReportEndpoint) {
	if d.Memory == nil || d.Token == nil {
		return
	}
	if err := d.Memory.Remember(ep); err != nil {
		// The next run watches the broadcast instead: no harm but a
		// request.
		d.Log.Error(err, "remembering the report endpoint")
	}
}

// followLeader delivers the broadcast as the leader at ep streams it, for
// as long as it names that leader. When the stream cannot be opened
// within FallbackAfter, ends, or the broadcast names another endpoint (a
// new leader's, or none), the agent watches the ConfigMap instead, for the
// rest of its run: the watch begins with the broadcast as it stands, so
// nothing is missed in between.
func (d *DirectTransport) followLeader(ctx context.Context, ep protocol.ReportEndpoint) <-chan protocol.Broadcast {
	out := make(chan protocol.Broadcast, 1)
	go func() {
		defer close(out)
		var last *protocol.Broadcast
		send := func(b protocol.Broadcast) bool {
			if last != nil && last.Equal(b) {
				return true
			}
			last = &b
			select {
			case out <- b:
				return true
			case <-ctx.Done():
				return false
			}
		}
		err := d.stream(ctx, ep, func(b protocol.Broadcast) bool {
			return send(b) && b.Reports == ep
		})
		if ctx.Err() != nil {
			return
		}
		d.Log.Info("watching the broadcast instead of following the leader's stream", "address", ep.Address, "reason", err.Error())
		in, err := d.KubeTransport.Broadcasts(ctx)
		if err != nil {
			d.Log.Error(err, "watching the broadcast")
			return
		}
		for b := range in {
			if !send(b) {
				return
			}
		}
	}()
	return out
}

// maxBroadcastLine bounds one line of the broadcast stream: a ConfigMap's
// data is at most 1 MiB, and JSON escapes some of its characters. A longer
// line ends the stream, and the agent watches instead.
const maxBroadcastLine = 4 << 20

// errOtherEndpoint: the streamed broadcast names another endpoint than
// the leader's that streams it.
var errOtherEndpoint = errors.New("the broadcast names another report endpoint")

// stream reads the broadcast from the endpoint ep (protocol.BroadcastPath)
// and passes each broadcast to fn, until fn returns false, the stream
// ends or fails, or no broadcast came within FallbackAfter of the
// request.
func (d *DirectTransport) stream(ctx context.Context, ep protocol.ReportEndpoint, fn func(protocol.Broadcast) bool) error {
	d.mu.Lock()
	if d.endpoint.IsZero() {
		// The endpoint the broadcast will name, as far as the agent
		// knows: its first report goes there, on the same connection.
		d.endpoint = ep
	}
	d.mu.Unlock()
	_, client, err := d.current()
	if err != nil {
		return err
	}
	raw, err := d.Token()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A leader gone (its address unreachable, another CA there) is given
	// up on as a report to it is.
	first := time.AfterFunc(d.fallbackAfter(), cancel)
	defer first.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+ep.Address+protocol.BroadcastPath, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+raw)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var answer protocol.ReportAnswer
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&answer)
		return fmt.Errorf("the report endpoint answered %d: %s", resp.StatusCode, answer.Message)
	}
	lines := bufio.NewScanner(resp.Body)
	// A broadcast is a few KB, its CA most of it.
	lines.Buffer(make([]byte, 0, 16<<10), maxBroadcastLine)
	for {
		if !lines.Scan() {
			err := lines.Err()
			if err == nil {
				err = io.EOF
			}
			return fmt.Errorf("the leader's broadcast stream ended: %w", err)
		}
		var data map[string]string
		if err := json.Unmarshal(lines.Bytes(), &data); err != nil {
			return fmt.Errorf("the leader streamed an invalid broadcast: %w", err)
		}
		if first.Stop() {
			d.Log.Info("following the leader's broadcast", "address", ep.Address, "session", ep.Session)
		}
		b, err := protocol.DecodeBroadcast(data)
		if err != nil {
			return fmt.Errorf("the leader streamed an invalid broadcast: %w", err)
		}
		if !fn(b) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errOtherEndpoint
		}
	}
}

// observe notes a broadcast and reports whether it names another endpoint,
// or none where it named one, while the agent has something to say.
func (d *DirectTransport) observe(b protocol.Broadcast) bool {
	d.mu.Lock()
	d.last = b
	if d.Token == nil {
		// No token for the controller: the agent was injected without
		// one (direct reports off at the webhook), and writes its Pod.
		b.Reports = protocol.ReportEndpoint{}
	}
	if b.Reports == d.endpoint {
		d.mu.Unlock()
		return false
	}
	changed := !d.endpoint.IsZero() || !b.Reports.IsZero()
	if d.client != nil {
		d.client.CloseIdleConnections()
	}
	d.endpoint, d.client, d.fallback, d.fellBack, d.failing, d.retries = b.Reports, nil, false, time.Time{}, time.Time{}, 0
	sayAgain := changed && d.state.Epoch > 0
	d.mu.Unlock()
	// Outside the lock: reports do not wait on the file.
	d.remember(b.Reports)
	return sayAgain
}

// sayAgain says the agent's state again after the broadcast named another
// endpoint (a new leader's), or none (then on the Pod), until it is taken
// or the broadcast changes again.
func (d *DirectTransport) sayAgain(ctx context.Context, session string) {
	err := Retry(ctx, func(ctx context.Context) error {
		d.mu.Lock()
		current := d.endpoint.Session
		d.mu.Unlock()
		if current != session {
			return nil
		}
		err := d.say(ctx)
		if err != nil {
			d.Log.V(1).Info("saying the state again failed; retrying", "error", err)
		}
		return err
	}, refused)
	if err == nil {
		d.Log.Info("said the state again", "session", session, "direct", d.Direct())
	}
}

// Direct reports whether the agent reports to an endpoint now: then the
// Pod's annotations, and the epoch the Downward API gave from them, may
// be behind, and Self asks the controller.
func (d *DirectTransport) Direct() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.endpoint.IsZero() && !d.fallback
}

// ReportEpoch reports the agent's epoch.
func (d *DirectTransport) ReportEpoch(ctx context.Context, epoch int32) error {
	return d.update(ctx, func(r *protocol.Report) { r.Epoch = epoch })
}

// ReportProcessEpoch reports the epoch and the worker restarts.
func (d *DirectTransport) ReportProcessEpoch(ctx context.Context, epoch, workerRestarts int32) error {
	return d.update(ctx, func(r *protocol.Report) { r.Epoch, r.WorkerRestarts = epoch, workerRestarts })
}

// ReportWorkerExit reports a worker's exit, with its code.
func (d *DirectTransport) ReportWorkerExit(ctx context.Context, exit protocol.WorkerExit) error {
	return d.update(ctx, func(r *protocol.Report) { r.WorkerExit = &exit })
}

// ReportReady reports the epoch at which the Pod's workers are ready.
func (d *DirectTransport) ReportReady(ctx context.Context, epoch int32) error {
	return d.update(ctx, func(r *protocol.Report) { r.ReadyEpoch = epoch })
}

// update changes the state and says it, directly or, failing that, on the
// Pod.
func (d *DirectTransport) update(ctx context.Context, change func(*protocol.Report)) error {
	d.mu.Lock()
	change(&d.state)
	d.state.JobSet = d.JobSet
	d.mu.Unlock()
	return d.say(ctx)
}

// say says the whole state, directly or, failing that, on the Pod: all of
// it, since what was said to a leader before is not on the Pod, and the
// controller reads a worker's exit or readiness only at the epoch the Pod
// carries.
func (d *DirectTransport) say(ctx context.Context) error {
	err := d.deliver(ctx)
	if !errors.Is(err, errNotDirect) {
		return err
	}
	d.mu.Lock()
	state := d.state
	d.mu.Unlock()
	if state.Epoch == 0 {
		return nil // nothing said yet
	}
	return d.ReportState(ctx, state)
}

// deliver PUTs the state to the endpoint. A report that fails on the way
// for longer than FallbackAfter turns the fallback on (errNotDirect); so
// does having no endpoint.
func (d *DirectTransport) deliver(ctx context.Context) error {
	d.send.Lock()
	defer d.send.Unlock()
	ep, client, err := d.current()
	if errors.Is(err, errUnusableEndpoint) && d.NoPodFallback {
		return err
	}
	if err != nil {
		return errNotDirect
	}
	d.mu.Lock()
	state := d.state
	d.mu.Unlock()
	body, err := json.Marshal(state)
	if err != nil {
		return err
	}
	var answer protocol.ReportAnswer
	began := time.Now()
	status, err := d.do(ctx, client, ep, http.MethodPut, body, &answer)
	switch {
	case err != nil:
		return d.failed(ep, err, began)
	case status == http.StatusOK:
		d.mu.Lock()
		d.failing, d.retried, d.retries = time.Time{}, false, 0
		d.mu.Unlock()
		return nil
	case status == http.StatusConflict:
		d.mu.Lock()
		d.held = max(d.held, answer.Epoch)
		d.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrReportRefused, answer.Message)
	case answer.Reason == protocol.ReasonUnauthenticated || answer.Reason == protocol.ReasonTokenRefused || answer.Reason == protocol.ReasonPodGone:
		// Nothing the agent says would be taken: its Pod says it, after
		// FallbackAfter, as for an endpoint it cannot reach.
		d.Log.Info("the report endpoint refused the agent", "reason", answer.Reason, "message", answer.Message)
		return d.failed(ep, fmt.Errorf("%w: %d %s", ErrReportRefused, status, answer.Message), began)
	case status == http.StatusForbidden || status == http.StatusUnauthorized || status == http.StatusBadRequest:
		return fmt.Errorf("%w: %d %s", ErrReportRefused, status, answer.Message)
	}
	return d.failed(ep, fmt.Errorf("the report endpoint answered %d: %s", status, answer.Message), began)
}

// failed notes a report that failed on the way, and falls back once they
// have failed for FallbackAfter.
func (d *DirectTransport) failed(ep protocol.ReportEndpoint, err error, began time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.endpoint != ep {
		return err // a new endpoint: try that
	}
	if d.failing.IsZero() {
		// From the start of the attempt that failed: a leader whose
		// packets are dropped fails an attempt only at its timeout.
		d.failing = began
	}
	after := d.fallbackAfter()
	if time.Since(d.failing) < after || d.NoPodFallback {
		return err
	}
	if d.retried {
		d.retries++
	}
	d.fallback, d.fellBack, d.retried = true, time.Now(), false
	d.Log.Info("the report endpoint cannot be reached: reporting on the Pod until the broadcast names another, or for a while", "address", ep.Address, "retryAfter", d.retryWait(), "error", err.Error())
	return errNotDirect
}

func (d *DirectTransport) retryDirectAfter() time.Duration {
	if d.RetryDirectAfter <= 0 {
		return DefaultRetryDirectAfter
	}
	return d.RetryDirectAfter
}

// maxRetryWait bounds the wait between tries of an endpoint out of reach.
const maxRetryWait = 10 * time.Minute

// retryWait is how long after a fallback the endpoint is tried again:
// RetryDirectAfter, doubled for each try that fell back again.
func (d *DirectTransport) retryWait() time.Duration {
	w := d.retryDirectAfter()
	for range d.retries {
		if w >= maxRetryWait {
			break
		}
		w *= 2
	}
	return min(w, maxRetryWait)
}

func (d *DirectTransport) fallbackAfter() time.Duration {
	if d.FallbackAfter <= 0 {
		return DefaultFallbackAfter
	}
	return d.FallbackAfter
}

// Self returns the epoch the controller holds for the Pod, with what its
// workers do. Reporting directly, the agent asks the controller, not the
// API server, and reads its Pod only when the answer lets it resume (an
// epoch above the deprecated one, where whether its workers run decides).
// Each try asks the endpoint the broadcast names then: a leader that goes
// away while the agent asks is followed to the next.
func (d *DirectTransport) Self(ctx context.Context) (int32, Workers, error) {
	var report protocol.Report
	err := Retry(ctx, func(ctx context.Context) error {
		ep, client, err := d.current()
		if err != nil {
			return errNotDirect // its Pod says what it carries
		}
		began := time.Now()
		status, err := d.do(ctx, client, ep, http.MethodGet, nil, &report)
		switch {
		case err == nil && status == http.StatusOK:
			return nil
		case err == nil && status < 500:
			// Refused (a Pod the leader's cache does not show yet, say):
			// the Pod says what it carries.
			return errNotDirect
		case err == nil:
			err = fmt.Errorf("the report endpoint answered %d", status)
		}
		return d.failed(ep, err, began)
	}, func(err error) bool { return errors.Is(err, errNotDirect) })
	if errors.Is(err, errNotDirect) {
		return d.KubeTransport.Self(ctx)
	}
	if err != nil {
		return 0, WorkersStopped, err
	}
	d.mu.Lock()
	last, held := d.last, d.held
	d.mu.Unlock()
	epoch := max(report.Epoch, held)
	if epoch <= last.DeprecatedEpoch {
		// A new epoch whatever the workers do: no read of the Pod.
		d.Log.Info("asked the leader for the epoch it holds", "epoch", epoch, "readPod", false)
		return epoch, WorkersStopped, nil
	}
	d.Log.Info("asked the leader for the epoch it holds", "epoch", epoch, "readPod", true)
	podEpoch, workers, err := d.KubeTransport.Self(ctx)
	if err != nil {
		return 0, WorkersStopped, err
	}
	return max(epoch, podEpoch), workers, nil
}

// current is the endpoint the broadcast names and the client for it, or
// errNotDirect when the agent reports on its Pod. An endpoint whose CA
// cannot be used (errUnusableEndpoint) turns the fallback on, unless the
// agent may not write its Pod.
func (d *DirectTransport) current() (protocol.ReportEndpoint, *http.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ep := d.endpoint
	if d.fallback && !d.fellBack.IsZero() && time.Since(d.fellBack) >= d.retryWait() {
		// What the Pod carries meanwhile is merged with what the agent
		// says here: the higher of the two wins.
		d.Log.Info("trying the report endpoint again", "address", ep.Address)
		d.fallback, d.fellBack, d.failing, d.retried = false, time.Time{}, time.Time{}, true
		if d.client != nil {
			d.client.CloseIdleConnections()
			d.client = nil
		}
	}
	if ep.IsZero() || d.fallback {
		return ep, nil, errNotDirect
	}
	if d.client == nil {
		client, err := d.newClient(ep)
		if err != nil {
			d.fallback = !d.NoPodFallback
			d.Log.Error(err, "the broadcast's report endpoint is unusable", "podFallback", !d.NoPodFallback)
			return ep, nil, fmt.Errorf("%w: %w", errUnusableEndpoint, err)
		}
		d.client = client
	}
	return ep, d.client, nil
}

// errUnusableEndpoint: the broadcast's endpoint cannot be used as it
// stands (its CA holds no certificate).
var errUnusableEndpoint = errors.New("the broadcast's report endpoint is unusable")

// do sends one request to the endpoint and decodes its JSON answer.
func (d *DirectTransport) do(ctx context.Context, client *http.Client, ep protocol.ReportEndpoint, method string, body []byte, into any) (int, error) {
	raw, err := d.Token()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+ep.Address+protocol.ReportPath, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+raw)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(into); err != nil && resp.StatusCode == http.StatusOK {
		return resp.StatusCode, fmt.Errorf("reading the report endpoint's answer: %w", err)
	}
	return resp.StatusCode, nil
}

// newClient is an HTTP/2 client for the endpoint, checking its
// certificate against the broadcast's CA and server name.
func (d *DirectTransport) newClient(ep protocol.ReportEndpoint) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(ep.CA)) {
		return nil, fmt.Errorf("the broadcast's %s holds no PEM certificate", protocol.KeyReportCA)
	}
	dial := d.Dial
	if dial == nil {
		// No longer than the fallback waits: a leader whose packets are
		// dropped is given up on at FallbackAfter, not at a timeout past
		// it.
		dial = (&net.Dialer{Timeout: min(reportTimeout, d.fallbackAfter()), KeepAlive: 30 * time.Second}).DialContext
	}
	t := &http.Transport{
		DialContext:         dial,
		TLSClientConfig:     &tls.Config{RootCAs: pool, ServerName: ep.ServerName, MinVersion: tls.VersionTLS13},
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: reportTimeout,
		MaxIdleConns:        1,
		IdleConnTimeout:     0, // one connection, kept
		// A connection that died silently (its leader's node gone) is
		// found out by a ping, not reused until TCP gives up minutes
		// later.
		HTTP2: &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 10 * time.Second},
	}
	return &http.Client{Transport: t}, nil
}
