package restartbench

import (
	"context"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// requestCounter counts one actor's requests to the API server by verb and
// resource ("patch pods", "watch configmaps", "update pods/status"), and
// the connections it opened through dial: each a TLS handshake with the
// API server.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	// sent is every request since the last forget, with when it was
	// sent: a restart's requests split at a moment of it (the group's
	// release) are counted from here.
	sent  []sentRequest
	dials atomic.Int64
}

// sentRequest is one request, named as in counts, and when it was sent.
type sentRequest struct {
	at  time.Time
	key string
}

// dial opens a connection, counted. A client configuration given it gets a
// transport (and connections) of its own: client-go shares transports only
// between configurations without a dialer.
func (c *requestCounter) dial(ctx context.Context, network, address string) (net.Conn, error) {
	c.dials.Add(1)
	return (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext(ctx, network, address)
}

func newRequestCounter() *requestCounter { return &requestCounter{counts: map[string]int{}} }

// wrap makes every client built from cfg count through c.
func (c *requestCounter) wrap(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &countingRoundTripper{c: c, next: rt}
	})
}

type countingRoundTripper struct {
	c    *requestCounter
	next http.RoundTripper
}

func (t *countingRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	key, at := requestKey(req), time.Now()
	t.c.mu.Lock()
	t.c.counts[key]++
	t.c.sent = append(t.c.sent, sentRequest{at: at, key: key})
	t.c.mu.Unlock()
	return t.next.RoundTrip(req)
}

// WrappedRoundTripper lets client-go reach the transport beneath (to close
// its idle connections).
func (t *countingRoundTripper) WrappedRoundTripper() http.RoundTripper { return t.next }

func (c *requestCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// between counts the requests sent from from to to, both included, by
// "verb resource".
func (c *requestCounter) between(from, to time.Time) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, r := range c.sent {
		if !r.at.Before(from) && !r.at.After(to) {
			out[r.key]++
		}
	}
	return out
}

// forget drops the times of the requests sent so far; the counts stay.
// Called before each restart, it bounds what is kept to one restart's.
func (c *requestCounter) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = nil
}

// requestKey names a request "verb resource[/subresource]", as the API
// server's request metrics do.
func requestKey(req *http.Request) string {
	segs := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// /api/v1/... or /apis/group/version/...
	i := 2
	if len(segs) > 0 && segs[0] == "apis" {
		i = 3
	}
	if len(segs) > i+1 && segs[i] == "namespaces" && len(segs) > i+2 {
		i += 2
	}
	if len(segs) <= i {
		return strings.ToLower(req.Method) + " " + req.URL.Path
	}
	resource, rest := segs[i], segs[i+1:]
	named := len(rest) > 0
	if len(rest) > 1 {
		resource += "/" + rest[1]
	}
	verb := ""
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = strings.ToLower(req.Method)
	}
	return verb + " " + resource
}

// writes sums the requests that change something.
func writes(counts map[string]int) int {
	n := 0
	for k, v := range counts {
		switch strings.SplitN(k, " ", 2)[0] {
		case "create", "update", "patch", "delete":
			n += v
		}
	}
	return n
}

// periodic sums the requests a controller sends at a rate whatever a
// restart does, so that a longer restart holds more of them: watches,
// which each informer opens again as the last one times out, and the
// upstream JobSet check's reads of the JobSet CRD and of upstream's
// Leases (controller/upstream_gate.go, at least every 30 s).
func periodic(counts map[string]int) int {
	n := 0
	for k, v := range counts {
		verb, resource, _ := strings.Cut(k, " ")
		if verb == "watch" || (verb == "get" && (resource == "customresourcedefinitions" || resource == "leases")) {
			n += v
		}
	}
	return n
}
