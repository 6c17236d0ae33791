package simnode

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// The Pod network behaves as TCP does for the agents and their probes: an
// address in use is refused, a closed one is free again at once, a dial to
// nothing is refused, and HTTP works over it.
func TestPodNet(t *testing.T) {
	n := NewNetwork()
	l, err := n.Listen("10.0.1.1:18080")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Listen("10.0.1.1:18080"); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("second listen on an address in use: %v, want EADDRINUSE", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })}
	go func() { _ = srv.Serve(l) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := n.probeClient()
	for range 3 { // a new connection per probe
		if !probe(ctx, client, "http://10.0.1.1:18080/healthz", time.Second) {
			t.Fatal("a probe of a serving agent failed")
		}
	}
	if probe(ctx, client, "http://10.0.1.2:18080/healthz", time.Second) {
		t.Error("a probe of an address nobody listens on passed")
	}
	if _, err := n.DialContext(ctx, "tcp", "10.0.1.2:18080"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial to nothing: %v, want ECONNREFUSED", err)
	}
	srv.Close()
	if _, err := n.DialContext(ctx, "tcp", "10.0.1.1:18080"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial after close: %v, want ECONNREFUSED", err)
	}
	l2, err := n.Listen("10.0.1.1:18080")
	if err != nil {
		t.Fatalf("the address is not free after close: %v", err)
	}
	l2.Close()
}

// An agent's report connection reaches a leader listening on the Pod
// network there, and any other address on the host's network.
func TestDialReports(t *testing.T) {
	n := NewNetwork()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	served := func(l net.Listener, name string) {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(name)) })}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { srv.Close() })
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served(tcp, "host")
	mem, err := n.Listen("127.0.0.1:1") // a port nothing serves on the host
	if err != nil {
		t.Fatal(err)
	}
	served(mem, "pod network")
	client := &http.Client{Transport: &http.Transport{DialContext: n.DialReports}}
	for addr, want := range map[string]string{tcp.Addr().String(): "host", "127.0.0.1:1": "pod network"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != want {
			t.Errorf("%s answered from %q, want %q", addr, body, want)
		}
	}
}
