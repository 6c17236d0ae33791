package reports

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/inplace-dev/inplace/api/protocol"
)

// rawHTTP2 opens an HTTP/2 connection to f's endpoint by hand, sends the
// preface and its settings, and returns its framer: a peer that answers
// what the test makes it answer. Reads fail after timeout.
func rawHTTP2(t *testing.T, f *fixture, tlsConfig *tls.Config) *http2.Framer {
	t.Helper()
	tlsConfig = tlsConfig.Clone()
	tlsConfig.NextProtos = []string{"h2"}
	conn, err := tls.Dial("tcp", f.srv.Addr().String(), tlsConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	framer := http2.NewFramer(conn, conn)
	if err := framer.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		t.Fatal(err)
	}
	return framer
}

// readUntilClosed hands each frame the leader sends to seen until it
// closes the connection, and fails the test if it has not within timeout
// (rawHTTP2's read deadline).
func readUntilClosed(t *testing.T, framer *http2.Framer, seen func(http2.Frame)) {
	t.Helper()
	for {
		frame, err := framer.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("reading from the leader: %v, want the connection closed (EOF) within %s", err, timeout)
			}
			return
		}
		seen(frame)
	}
}

// agentGet asks f's endpoint, over HTTP/2, for what it holds for Pod p0,
// authenticating as its agent.
func agentGet(t *testing.T, ctx context.Context, client *http.Client, f *fixture) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+f.srv.Addr().String()+protocol.ReportPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer p0")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("GET over %s, want HTTP/2", resp.Proto)
	}
}

// startKeepAliveServer serves f's endpoint with keep-alive ka, and
// returns the TLS configuration that trusts it.
func startKeepAliveServer(t *testing.T, f *fixture, ka keepAlive) *tls.Config {
	t.Helper()
	f.srv.keepAlive = ka
	return startServer(t, f)
}

// startServer serves f's endpoint until the test ends, and returns the
// TLS configuration that trusts it.
func startServer(t *testing.T, f *fixture) *tls.Config {
	t.Helper()
	if err := f.srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	return startedTLS(t, f)
}

// startedTLS is the TLS configuration that trusts f's endpoint.
func startedTLS(t *testing.T, f *fixture) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(f.srv.Endpoint().CA)) {
		t.Fatal("the endpoint's CA does not parse")
	}
	return &tls.Config{RootCAs: pool, ServerName: f.srv.Endpoint().ServerName, MinVersion: tls.VersionTLS13}
}

// An agent keeps its one connection through a quiet spell: the leader's
// pings are answered, and the next report goes on the same connection,
// with no new handshake on a restart's critical path.
func TestServerKeepsAnIdleAgentsConnection(t *testing.T) {
	if day := 24 * time.Hour; defaultKeepAlive.idle < day {
		t.Errorf("idle connections are closed after %s: after a quiet spell that long every agent would handshake again at the next restart", defaultKeepAlive.idle)
	}
	f := newFixture(t, newWorld().reader(t))
	// The client's answer to a ping may be late on a busy machine: it is
	// given seconds, and the quiet spell many pings.
	ping := 100 * time.Millisecond
	tlsConfig := startKeepAliveServer(t, f, keepAlive{idle: defaultKeepAlive.idle, authenticate: 5 * ping, ping: ping, pingTimeout: 3 * time.Second, request: defaultKeepAlive.request})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}, Timeout: timeout}
	defer client.CloseIdleConnections()
	get := func() (reused bool) {
		t.Helper()
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
		agentGet(t, httptrace.WithClientTrace(context.Background(), trace), client, f)
		return reused
	}
	get()
	// Twenty of the leader's ping periods, each of which would end a
	// connection whose peer does not answer, and four times the wait for
	// an agent to authenticate, which the first request did.
	quiet := time.NewTimer(20 * ping)
	<-quiet.C
	if !get() {
		t.Error("the report after a quiet spell opened a new connection, want the agent's one connection kept")
	}
}

// A peer that stops answering (its node gone without closing the
// connection) has its connection closed after one unanswered ping.
func TestServerClosesAConnectionWhosePeerIsGone(t *testing.T) {
	f := newFixture(t, newWorld().reader(t))
	ping := 100 * time.Millisecond
	tlsConfig := startKeepAliveServer(t, f, keepAlive{idle: defaultKeepAlive.idle, authenticate: time.Hour, ping: ping, pingTimeout: ping, request: defaultKeepAlive.request})
	framer := rawHTTP2(t, f, tlsConfig)
	// The peer reads what the leader sends and answers nothing: not its
	// settings, not its pings.
	began, pinged := time.Now(), false
	readUntilClosed(t, framer, func(frame http2.Frame) {
		if p, ok := frame.(*http2.PingFrame); ok && !p.IsAck() {
			pinged = true
		}
	})
	if !pinged {
		t.Error("the leader closed the connection without pinging its peer first")
	}
	t.Logf("closed %s after the peer went silent", time.Since(began).Round(time.Millisecond))
}

// closeNotingConn notes when the server has closed the connection: the
// client's read of it fails.
type closeNotingConn struct {
	net.Conn
	closed chan struct{}
	once   sync.Once
}

func (c *closeNotingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() { close(c.closed) })
	}
	return n, err
}

// A connection idle past the idle timeout is closed although its peer
// answers every ping: pings keep a connection whose peer is there, the
// idle timeout bounds how long it is kept.
func TestServerClosesAConnectionIdlePastItsTimeout(t *testing.T) {
	f := newFixture(t, newWorld().reader(t))
	tlsConfig := startKeepAliveServer(t, f, keepAlive{idle: 300 * time.Millisecond, authenticate: time.Hour, ping: 50 * time.Millisecond, pingTimeout: 3 * time.Second, request: defaultKeepAlive.request})
	conns := make(chan *closeNotingConn, 1)
	tlsConfig.NextProtos = []string{"h2"}
	// x/net's HTTP/2 transport takes a wrapped TLS connection as HTTP/2
	// without looking for ALPN on it, which net/http's does not.
	client := &http.Client{Transport: &http2.Transport{ //nolint:staticcheck // deprecated for net/http's, which does not take a wrapped connection as HTTP/2
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) { //nolint:staticcheck // as the transport
			c, err := (&tls.Dialer{Config: tlsConfig}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			noting := &closeNotingConn{Conn: c, closed: make(chan struct{})}
			conns <- noting
			return noting, nil
		},
	}, Timeout: timeout}
	defer client.CloseIdleConnections()
	agentGet(t, context.Background(), client, f)
	select {
	case <-(<-conns).closed:
	case <-time.After(timeout):
		t.Fatalf("a connection idle past its 300ms timeout was still open after %s", timeout)
	}
}

// A connection on which no agent authenticates is closed soon after it
// opens, although it answers every ping: anyone who reaches the port
// holds a connection for that long, not for the year an agent's is kept.
func TestServerClosesAConnectionThatNeverAuthenticates(t *testing.T) {
	f := newFixture(t, newWorld().reader(t))
	tlsConfig := startKeepAliveServer(t, f, keepAlive{idle: defaultKeepAlive.idle, authenticate: 300 * time.Millisecond, ping: 50 * time.Millisecond, pingTimeout: 3 * time.Second, request: defaultKeepAlive.request})
	framer := rawHTTP2(t, f, tlsConfig)
	answered := 0
	readUntilClosed(t, framer, func(frame http2.Frame) {
		switch fr := frame.(type) {
		case *http2.SettingsFrame:
			if !fr.IsAck() {
				_ = framer.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !fr.IsAck() {
				answered++
				_ = framer.WritePing(true, fr.Data)
			}
		}
	})
	if answered == 0 {
		t.Error("the leader closed the connection before pinging it: the test did not show that answered pings do not keep it")
	}
}
