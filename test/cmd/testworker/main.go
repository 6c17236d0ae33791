package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// socketPath is where a running worker listens for `exit C`; one per
// container (each has its own file system).
var socketPath = filepath.Join(os.TempDir(), "inplace-testworker.sock")

// startedPath records when the running worker started, and its pid, for
// `ready`: in process scope the container's file system outlives the
// worker, and a record of a worker that is gone says nothing.
var startedPath = filepath.Join(os.TempDir(), "inplace-testworker.started")

// unreadyPath, while it exists, makes `ready` fail: a worker that runs
// but stays unready, as one stuck loading its data.
var unreadyPath = filepath.Join(os.TempDir(), "inplace-testworker.unready")

// defaultBarrierURL is the injected agent's barrier with the default
// configuration; BARRIER_URL overrides it, "none" turns the question off.
const defaultBarrierURL = "http://127.0.0.1:18080/barrier-is-lifted"

const usage = `usage:
  inplace-testworker run     ask the barrier (BARRIER_URL) what it answered, log it, then run until told to exit (or exit 143 on SIGTERM, TERM_DELAY after it)
  inplace-testworker exit C  make the running worker of this container exit with code C
  inplace-testworker ready   succeed once the running worker has run READY_AFTER_SECONDS (a readiness probe)
  inplace-testworker unready make ready fail from now on, for as long as this container's file system lives
  inplace-testworker pause   sleep until SIGTERM or SIGINT (the pause image)
  inplace-testworker resolve NAME IP
                             succeed once NAME resolves to IP through the Pod's DNS (fail after 60s)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = run()
	case "exit":
		if len(os.Args) != 3 {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		err = tellExit(os.Args[2])
	case "ready":
		err = ready()
	case "unready":
		err = os.WriteFile(unreadyPath, nil, 0o644)
	case "resolve":
		if len(os.Args) != 4 {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		err = resolve(os.Args[2], os.Args[3])
	case "pause":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		<-ctx.Done()
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "inplace-testworker:", err)
		os.Exit(1)
	}
}

// run logs what the barrier answered when the worker starts — the kubelet
// starts it only once the agent's startup probe passed, so the answer says
// at which epoch the barrier let it through — then waits for `exit C`.
func run() error {
	if epoch := os.Getenv("INPLACE_EPOCH"); epoch != "" {
		// Started by the supervisor (process scope), which says at which epoch.
		logf("started pod=%s epoch=%s", os.Getenv("POD_NAME"), epoch)
	} else {
		logf("started pod=%s", os.Getenv("POD_NAME"))
	}
	// Listening first: from the moment the container runs, `exit C` works.
	_ = os.Remove(socketPath) // a stale socket of this container's previous run
	l, err := net.Listen("unix", socketPath)
	if err != nil {
		return err
	}
	defer l.Close()
	codes := make(chan int, 1)
	go serveExit(l, codes)
	if err := os.WriteFile(startedPath, []byte(time.Now().UTC().Format(time.RFC3339Nano)+" "+strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	url := os.Getenv("BARRIER_URL")
	if url == "" {
		url = defaultBarrierURL
	}
	if url != "none" {
		code, body, err := ask(url)
		if err != nil {
			logf("barrier error=%q", err.Error())
		} else {
			logf("barrier status=%d body=%s", code, strings.TrimSpace(body))
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	select {
	case code := <-codes:
		logf("exiting code=%d", code)
		_ = l.Close()
		os.Exit(code)
	case <-ctx.Done():
		// As a training process the signal interrupts: not a success. A
		// worker that exited 0 here would complete its Job when its Pod is
		// deleted (the kubelet's phase is Succeeded), and no replacement
		// would come.
		if delay, err := time.ParseDuration(os.Getenv("TERM_DELAY")); err == nil && delay > 0 {
			// A worker that takes its time to stop, as one that saves
			// its state: the restart waits for it.
			logf("terminating in %s", delay)
			time.Sleep(delay)
		}
		logf("terminated code=%d", terminatedExitCode)
		_ = l.Close()
		os.Exit(terminatedExitCode)
	}
	return nil
}

// terminatedExitCode is how a process killed by SIGTERM reports (128+15).
const terminatedExitCode = 143

// ready succeeds once the running worker has run READY_AFTER_SECONDS (0 by
// default): a readiness probe that makes a Pod Ready later than it runs.
func ready() error {
	if _, err := os.Stat(unreadyPath); err == nil {
		return errors.New("told to be unready (inplace-testworker unready)")
	}
	data, err := os.ReadFile(startedPath)
	if err != nil {
		return fmt.Errorf("no running worker in this container (%w)", err)
	}
	at, pid, _ := strings.Cut(string(data), " ")
	started, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return err
	}
	if _, err := os.Stat("/proc/" + pid); pid == "" || err != nil {
		return fmt.Errorf("the worker that started at %s (pid %s) is gone", at, pid)
	}
	after, _ := strconv.Atoi(os.Getenv("READY_AFTER_SECONDS"))
	if d := time.Since(started); d < time.Duration(after)*time.Second {
		return fmt.Errorf("running for %v, ready after %ds", d.Round(time.Millisecond), after)
	}
	return nil
}

func ask(url string) (int, string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func serveExit(l net.Listener, codes chan<- int) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		code, convErr := strconv.Atoi(strings.TrimSpace(line))
		if err != nil || convErr != nil {
			fmt.Fprintf(conn, "error: want an exit code, got %q\n", line)
			_ = conn.Close()
			continue
		}
		fmt.Fprintln(conn, "ok")
		// Exit once the caller has read the answer and hung up, so that
		// `kubectl exec ... exit C` mostly ends before its container does.
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, _ = io.Copy(io.Discard, conn)
		_ = conn.Close()
		codes <- code
		return
	}
}

func tellExit(arg string) error {
	if _, err := strconv.Atoi(arg); err != nil {
		return fmt.Errorf("exit code %q: want a number", arg)
	}
	conn, err := net.DialTimeout("unix", socketPath, 5*time.Second)
	if err != nil {
		return fmt.Errorf("no running worker in this container (%w)", err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintln(conn, arg); err != nil {
		return err
	}
	reply, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if strings.TrimSpace(reply) != "ok" {
		return errors.New(strings.TrimSpace(reply))
	}
	return nil
}

// logf writes one line with the time in RFC 3339 with nanoseconds, so that
// tests can order the workers' starts.
func logf(format string, args ...any) {
	fmt.Printf("%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// resolve waits until name resolves to ip: a peer's record appears a
// moment after the peer got its address, as on any cluster.
func resolve(name, ip string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last string
	for {
		addrs, err := net.DefaultResolver.LookupHost(ctx, name)
		if err == nil && len(addrs) == 1 && addrs[0] == ip {
			logf("resolved %s to %s", name, ip)
			return nil
		}
		last = fmt.Sprintf("%v %v", addrs, err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not resolve to %s: last answer %s", name, ip, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
