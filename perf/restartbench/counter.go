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
	dials  atomic.Int64
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
	t.c.mu.Lock()
	t.c.counts[requestKey(req)]++
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

// diff returns after minus before, without zero entries.
func diff(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
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
