package supervisor

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/inplace-dev/inplace/api/protocol"
)

// This file is the supervisor's side of the worker protocol of in-process
// scope (api/protocol/inprocess.go): the control socket the worker connects to.
// The loop owns what the connections said; the socket's goroutines only
// carry lines to it.

// controlWrite bounds a write to a worker's connection: the loop must not
// wait on a worker that does not read.
const controlWrite = time.Second

// control is the listening control socket.
type control struct {
	addr     string
	listener net.Listener
	// events carries connections opened, lines read and connections
	// closed to the loop.
	events chan controlEvent
}

// controlConn is a worker's connection.
type controlConn struct {
	conn net.Conn
	// lineage is the process that connected and its ancestors up to the
	// supervisor's child: the worker or the standby, whichever it is or
	// descends from.
	lineage []int
	// parked is the last epoch it wrote "parked" for.
	parked protocol.Epoch
}

type controlEvent struct {
	conn *controlConn
	// opened: a new connection; line: a line it wrote (zero: it closed).
	opened bool
	line   protocol.WorkerLine
	closed bool
}

// listenControl opens the control socket at addr, or, if addr is empty, at
// a fresh name in the abstract namespace: unique, so that Pods that share
// a network namespace (hostNetwork) never meet.
func listenControl(addr, container string) (*control, error) {
	if addr == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		addr = "@inplace-supervisor/" + container + "/" + hex.EncodeToString(b)
	}
	l, err := net.Listen("unix", addr)
	if err != nil {
		return nil, err
	}
	return &control{addr: addr, listener: l, events: make(chan controlEvent, 16)}, nil
}

// serve accepts the worker's connections until ctx ends. Only the
// supervisor's descendants, the worker and what it started, may connect:
// in a Pod on the host's network the abstract namespace is the host's.
func (c *control) serve(ctx context.Context, logf func(string, ...any)) {
	go func() {
		<-ctx.Done()
		_ = c.listener.Close()
	}()
	// Refused connections are logged the first 3 times, then every
	// 100th: a Pod on the host's network shares the abstract namespace
	// with the host.
	refused := 0
	for {
		conn, err := c.listener.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				logf("control socket: %v", err)
			}
			return
		}
		pid, err := peerPID(conn)
		lineage := descent(pid, os.Getpid())
		if err != nil || lineage == nil {
			if refused++; refused <= 3 || refused%100 == 0 {
				logf("control socket: refused a connection from pid %d, not a process of the worker's (%d refused)", pid, refused)
			}
			_ = conn.Close()
			continue
		}
		cc := &controlConn{conn: conn, lineage: lineage}
		select {
		case c.events <- controlEvent{conn: cc, opened: true}:
		case <-ctx.Done():
			_ = conn.Close()
			return
		}
		go c.read(ctx, cc, logf)
	}
}

// read carries the lines of a connection to the loop, then its end.
func (c *control) read(ctx context.Context, cc *controlConn, logf func(string, ...any)) {
	sc := bufio.NewScanner(cc.conn)
	for sc.Scan() {
		line, err := protocol.ParseWorkerLine(sc.Text())
		if err == nil && line.Word != protocol.WorkerParked && line.Word != protocol.WorkerFailed {
			err = fmt.Errorf("worker protocol: a worker writes only %q or %q", protocol.WorkerParked, protocol.WorkerFailed)
		}
		if err != nil {
			logf("control socket: %v", err)
			continue
		}
		select {
		case c.events <- controlEvent{conn: cc, line: line}:
		case <-ctx.Done():
			return
		}
	}
	select {
	case c.events <- controlEvent{conn: cc, closed: true}:
	case <-ctx.Done():
	}
}

// send writes a line to a connection; false if it could not, and the
// connection is closed.
func (cc *controlConn) send(l protocol.WorkerLine) bool {
	_ = cc.conn.SetWriteDeadline(time.Now().Add(controlWrite))
	if _, err := cc.conn.Write([]byte(l.String() + "\n")); err != nil {
		_ = cc.conn.Close()
		return false
	}
	return true
}

// peerPID is the pid of the process at the other end of a Unix connection.
func peerPID(conn net.Conn) (int, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return 0, errors.New("not a Unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	return int(cred.Pid), nil
}

// descent is pid and its ancestors up to a child of ancestor, by the
// parent pids in /proc, or nil if pid does not descend from ancestor. A
// process of another pid namespace has pid 0 here.
func descent(pid, ancestor int) []int {
	var lineage []int
	for range 64 {
		if pid <= 1 {
			return nil
		}
		lineage = append(lineage, pid)
		ppid, err := parentPID(pid)
		if err != nil {
			return nil
		}
		if ppid == ancestor {
			return lineage
		}
		pid = ppid
	}
	return nil
}

// from reports whether the connection's process is pid or descends from
// it.
func (cc *controlConn) from(pid int) bool { return slices.Contains(cc.lineage, pid) }

// parentPID reads a process's parent from /proc/<pid>/stat, whose second
// field (the command, in parentheses) may hold spaces and parentheses:
// the fields after its last ")" are state, then ppid.
func parentPID(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unreadable stat")
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 {
		return 0, errors.New("unreadable stat")
	}
	return strconv.Atoi(fields[1])
}
