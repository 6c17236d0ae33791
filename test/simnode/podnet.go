package simnode

import (
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// Network is the network between the simulated kubelets and their Pods'
// containers: in memory. Each Pod keeps its own address, and a probe is a
// real HTTP request to the agent's real server over a connection of its
// own; only the sockets are gone. A node's loopback is not what the
// simulation measures, and thousands of Pods' listeners and held probes
// would exceed one process's open-file limit (4 descriptors per Pod ran
// out at 5,000 Pods).
//
// A leader that runs in the simulating process may listen on it too
// (Listen), for its agents' reports: their connections are then as
// real as the probes' (TLS, HTTP/2, one per agent) and cost no
// descriptor, where 10,000 agents' connections and the leader's ends of
// them would not fit under the machine's limit. DialReports reaches
// such a listener, or else the host's network.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*podListener
}

// NewNetwork returns an empty Pod network.
func NewNetwork() *Network { return &Network{listeners: map[string]*podListener{}} }

// Listen listens on addr (host:port); like TCP, an address in use is an
// error.
func (n *Network) Listen(addr string) (net.Listener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.listeners[addr]; ok {
		return nil, &net.OpError{Op: "listen", Net: "pod", Addr: podAddr(addr), Err: syscall.EADDRINUSE}
	}
	l := &podListener{net: n, addr: podAddr(addr), conns: make(chan net.Conn), done: make(chan struct{})}
	n.listeners[addr] = l
	return l, nil
}

// DialContext connects to the listener on addr; with none, the connection
// is refused, as TCP's would be.
func (n *Network) DialContext(ctx context.Context, _, addr string) (net.Conn, error) {
	n.mu.Lock()
	l := n.listeners[addr]
	n.mu.Unlock()
	refused := &net.OpError{Op: "dial", Net: "pod", Addr: podAddr(addr), Err: syscall.ECONNREFUSED}
	if l == nil {
		return nil, refused
	}
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
		refused.Err = ctx.Err()
	}
	client.Close()
	server.Close()
	return nil, refused
}

// DialReports connects an agent to the report endpoint at addr: over the
// Pod network where a leader listens on it there, else over the host's.
func (n *Network) DialReports(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	_, inMemory := n.listeners[addr]
	n.mu.Unlock()
	if inMemory {
		return n.DialContext(ctx, network, addr)
	}
	return reportDialer.DialContext(ctx, network, addr)
}

// reportDialer is the agent's own, for an endpoint on the host's network.
var reportDialer = &net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}

// probeClient makes a kubelet's HTTP probes: a new connection per probe, as
// the kubelet's prober does, over the Pod network.
func (n *Network) probeClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: n.DialContext, DisableKeepAlives: true}}
}

type podListener struct {
	net   *Network
	addr  podAddr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *podListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close frees the address at once, as closing a TCP listener does.
func (l *podListener) Close() error {
	l.once.Do(func() {
		l.net.mu.Lock()
		if l.net.listeners[string(l.addr)] == l {
			delete(l.net.listeners, string(l.addr))
		}
		l.net.mu.Unlock()
		close(l.done)
	})
	return nil
}

func (l *podListener) Addr() net.Addr { return l.addr }

type podAddr string

func (a podAddr) Network() string { return "pod" }
func (a podAddr) String() string  { return string(a) }

// probe GETs url with the probe's timeout and reports whether it passed
// (a 2xx or 3xx answer).
func probe(ctx context.Context, client *http.Client, url string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}
