package supervisor

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/inplace-dev/inplace/api/protocol"
)

// probeReady runs the worker container's readiness probe against the
// worker started at epoch until it passes, then tells the agent; ctx ends
// with that worker.
func (s *supervisor) probeReady(ctx context.Context, epoch int32) {
	p := s.cfg.Readiness
	period := time.Duration(max(p.PeriodSeconds, 1)) * time.Second
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	wait := time.Duration(p.InitialDelaySeconds) * time.Second
	for {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
		wait = period
		if s.probeOnce(ctx, timeout) {
			break
		}
	}
	s.postUntilHeard(ctx, protocol.SupervisorReadyPath, url.Values{"epoch": {protocol.Epoch(epoch).String()}}, func() bool { return true })
}

// probeClient is the HTTP probes' client: as the kubelet's, it does not
// verify the worker's certificate, and keeps no connection between probes.
var probeClient = &http.Client{Transport: &http.Transport{
	Proxy: nil, DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
}}

// probeOnce runs the probe once, as the kubelet would from outside the
// container: the supervisor shares its network and file system.
func (s *supervisor) probeOnce(ctx context.Context, timeout time.Duration) bool {
	p := s.cfg.Readiness
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case len(p.Exec) > 0:
		return s.execProbe(ctx, p.Exec)
	case p.HTTPGet != nil:
		scheme := "http"
		if p.HTTPGet.Scheme == "HTTPS" {
			scheme = "https"
		}
		u := url.URL{Scheme: scheme, Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(p.HTTPGet.Port)), Path: p.HTTPGet.Path}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return false
		}
		resp, err := probeClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode < 400
	case p.TCPPort > 0:
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.TCPPort)))
		if err != nil {
			return false
		}
		conn.Close()
		return true
	}
	return true // no handler: ready once started
}

// execProbe runs command and reports whether it exited 0 in time. Its exit
// comes through the reaper, which reaps every child.
func (s *supervisor) execProbe(ctx context.Context, command []string) bool {
	if s.reaper == nil {
		return true // a modelled worker: no command to run
	}
	path, err := exec.LookPath(command[0])
	if err != nil {
		return false
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer null.Close()
	pid, exited, err := s.reaper.forkExec(path, command, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{null.Fd(), null.Fd(), null.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return false
	}
	select {
	case code := <-exited:
		return code == 0
	case <-ctx.Done():
		signalGroup(pid, syscall.SIGKILL)
		<-exited
		return false
	}
}
