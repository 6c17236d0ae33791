package reports

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/inplace-dev/inplace/api/protocol"
)

// startKeepAliveServer serves f's endpoint with keep-alive ka, and
// returns the TLS configuration that trusts it.
func startKeepAliveServer(t *testing.T, f *fixture, ka keepAlive) *tls.Config {
	t.Helper()
	f.srv.keepAlive = ka
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
	tlsConfig := startKeepAliveServer(t, f, keepAlive{idle: defaultKeepAlive.idle, ping: ping, pingTimeout: 3 * time.Second})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}, Timeout: timeout}
	defer client.CloseIdleConnections()
	get := func() (reused bool) {
		t.Helper()
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
		ctx := httptrace.WithClientTrace(context.Background(), trace)
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
		return reused
	}
	get()
	// Twenty of the leader's ping periods, each of which would end a
	// connection whose peer does not answer.
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
	tlsConfig := startKeepAliveServer(t, f, keepAlive{idle: defaultKeepAlive.idle, ping: ping, pingTimeout: ping})
	tlsConfig.NextProtos = []string{"h2"}
	conn, err := tls.Dial("tcp", f.srv.Addr().String(), tlsConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	framer := http2.NewFramer(conn, conn)
	if err := framer.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// The peer reads what the leader sends and answers nothing: not its
	// settings, not its pings.
	if err := conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		t.Fatal(err)
	}
	began, pinged := time.Now(), false
	for {
		frame, err := framer.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("reading from the leader: %v, want the connection closed (EOF) within %s", err, timeout)
			}
			break
		}
		if p, ok := frame.(*http2.PingFrame); ok && !p.IsAck() {
			pinged = true
		}
	}
	if !pinged {
		t.Error("the leader closed the connection without pinging its peer first")
	}
	t.Logf("closed %s after the peer went silent", time.Since(began).Round(time.Millisecond))
}
