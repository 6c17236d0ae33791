package policies

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/moby/sys/reexec"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// Evaluator processes.
//
// Rego runs inside OPA's evaluator, whose faults no recover reaches: a
// policy that unifies two values sharing their parts overflows the Go
// stack, and a comprehension allocates as fast as it can between the
// cancellation checks that enforce the time limit. Either ends, or
// starves, the process it runs in. So an isolated engine (Isolate) runs
// every evaluation in a child process of its own binary: the engine keeps
// the policies, their matching, health and metrics, and sends the child
// each query's source once, the changes to data.inventory, and one
// request's inputs. The engine ends a child whose evaluation outlives its
// time limit, or whose memory passes its bound; a child that ends, by
// itself or so, fails the evaluation under way alone (with the policy's
// enforcement action, as any failed evaluation), and the next evaluation
// starts a new one. What it takes a process to start and to take a
// request in (compiling the queries, copying the inventory) is no
// policy's: its failures are errEvaluatorUnavailable, never judged
// against a policy's health.

// IsolationOptions configure an engine's evaluator processes.
type IsolationOptions struct {
	// Processes is how many evaluator processes run, each evaluating one
	// request at a time; a request waits, within its time limit, for a
	// free one. Default 2.
	Processes int
	// MemoryLimit bounds each process's resident memory, in bytes: a
	// process past it is ended, and the evaluation it ran fails.
	// Default 256 MiB. Read on Linux only.
	MemoryLimit int64
	// Log tells of the processes that end.
	Log logr.Logger
}

// Isolation defaults.
const (
	DefaultEvaluatorProcesses   = 2
	DefaultEvaluatorMemoryLimit = 256 << 20
	// maxEvaluatorStack bounds a goroutine's stack in an evaluator: OPA
	// recurses once per nested term, a few hundred bytes a level.
	maxEvaluatorStack = 64 << 20
	// evaluatorGrace is how long past its time limit an evaluation may
	// take to answer before its process is ended: OPA checks for
	// cancellation between steps, and a starved process answers late.
	evaluatorGrace = 250 * time.Millisecond
	// evaluatorStartTimeout bounds a process's start, to its greeting.
	evaluatorStartTimeout = 10 * time.Second
	// memoryCheckInterval is how often an evaluation's process has its
	// memory read while the engine waits for its answer.
	memoryCheckInterval = 10 * time.Millisecond
)

// testHookLearned, if set by a test, is called with a process's pid once
// it has taken a request in.
var testHookLearned func(pid int)

// Errors of an evaluation that no process evaluated to its end; kindOf
// classifies them.
var (
	// errEvaluatorEnded: the process ended during the evaluation.
	errEvaluatorEnded = errors.New("the policy evaluator process ended")
	// errEvaluatorMemory: the process passed its memory limit.
	errEvaluatorMemory = errors.New("the policy evaluator process passed policies.evaluator.memoryLimit")
	// errEvaluatorUnavailable: no process could take the evaluation in
	// (none free, none started, one that failed while taking the
	// request in). No fault of the policy's.
	errEvaluatorUnavailable = errors.New("no policy evaluator process could evaluate")
	// errLearningTimedOut: taking a request in outlasted the request.
	errLearningTimedOut = errors.New("taking the request in did not end within its time limit")
)

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Isolate makes the engine evaluate the admin policies in child
// processes from now on: the running binary started again under another
// name, which serves as an evaluator from this package's initialization
// (evaluator_serve.go). It starts one process to check that the binary
// can; Close ends them.
func (e *Engine) Isolate(opts IsolationOptions) error {
	if opts.Processes <= 0 {
		opts.Processes = DefaultEvaluatorProcesses
	}
	if opts.MemoryLimit <= 0 {
		opts.MemoryLimit = DefaultEvaluatorMemoryLimit
	}
	pool := &evaluatorPool{opts: opts, engine: e, free: make(chan *evaluatorProcess, opts.Processes), live: map[*evaluatorProcess]bool{}}
	first, err := pool.start(time.Now().Add(evaluatorStartTimeout))
	if err != nil {
		return fmt.Errorf("%w (policies.evaluator.isolation None evaluates in the manager's own process)", err)
	}
	pool.free <- first
	for range opts.Processes - 1 {
		pool.free <- nil // started when first used
	}
	if !e.processes.CompareAndSwap(nil, pool) {
		pool.close()
		return errors.New("the policy engine is isolated already")
	}
	return nil
}

// Close ends the engine's evaluator processes; evaluations after it
// fail. An engine that was never isolated has none.
func (e *Engine) Close() {
	if pool := e.processes.Load(); pool != nil {
		pool.close()
	}
}

// forget tells the evaluator processes that the engine no longer holds
// a query.
func (e *Engine) forget(q *preparedQuery) {
	if pool := e.processes.Load(); pool != nil && q != nil {
		pool.forget(q.ID())
	}
}

type evaluatorPool struct {
	opts   IsolationOptions
	engine *Engine
	// free holds a slot per process: the process, nil if none runs in
	// it. A request holds a slot for its whole evaluation.
	free chan *evaluatorProcess

	mu     sync.Mutex
	live   map[*evaluatorProcess]bool
	closed bool
	// requests counts the requests sent to the processes.
	requests int
}

// evaluatorProcess is one child. Only the request holding its slot uses
// it, but for forget, which the pool's lock guards.
type evaluatorProcess struct {
	cmd     *exec.Cmd
	in      *bufio.Writer
	enc     *json.Encoder
	stdin   *os.File
	replies chan evaluatorResponse // closed when its output ends
	exited  chan struct{}          // closed when it has been waited for
	stderr  *tailBuffer

	// What it holds: the queries it prepared, the inventory snapshot it
	// copied.
	prepared  map[string]bool
	inventory *inventoryNode
	forgotten []string // under pool.mu

	mu sync.Mutex
	// why the engine ended it (nil: it ended by itself).
	why error
}

// start starts a process and waits for its greeting, until deadline at
// most.
func (pool *evaluatorPool) start(deadline time.Time) (*evaluatorProcess, error) {
	if pool.isClosed() {
		return nil, fmt.Errorf("%w: the policy engine is stopping", errEvaluatorUnavailable)
	}
	// A stack an eighth of the memory: a recursion fails as a stack
	// overflow, not as memory, even with the race detector's shadow.
	stack := min(int64(maxEvaluatorStack), pool.opts.MemoryLimit/8)
	cmd := reexec.Command(evaluatorProcessName,
		"-memory-limit", strconv.FormatInt(pool.opts.MemoryLimit, 10),
		"-max-stack", strconv.FormatInt(stack, 10))
	endWithParent(cmd)
	// Nothing of the manager's environment: a policy cannot read it
	// (opa.runtime is refused), and what it does not have it cannot
	// reveal.
	cmd.Env = []string{"GOTRACEBACK=single"}
	p := &evaluatorProcess{cmd: cmd, replies: make(chan evaluatorResponse, 1), exited: make(chan struct{}), stderr: &tailBuffer{max: 8 << 10}, prepared: map[string]bool{}}
	cmd.Stderr = p.stderr
	// Pipes of its own, so that a write can have a deadline.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errEvaluatorUnavailable, err)
	}
	cmd.Stdin = stdinR
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, fmt.Errorf("%w: %w", errEvaluatorUnavailable, err)
	}
	if err := cmd.Start(); err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, fmt.Errorf("%w: starting a process: %w", errEvaluatorUnavailable, err)
	}
	stdinR.Close()
	p.stdin, p.in = stdinW, bufio.NewWriterSize(stdinW, 1<<16)
	p.enc = json.NewEncoder(p.in)

	greeted := make(chan error, 1)
	go p.read(stdout, greeted)
	timer := time.NewTimer(min(time.Until(deadline), evaluatorStartTimeout))
	defer timer.Stop()
	select {
	case err = <-greeted:
	case <-timer.C:
		err = errors.New("it did not greet in time")
	}
	if err == nil {
		pool.mu.Lock()
		if err = nil; pool.closed {
			err = errors.New("the policy engine is stopping")
		} else {
			pool.live[p] = true
		}
		pool.mu.Unlock()
	}
	if err != nil {
		p.kill(nil)
		<-p.exited
		return nil, fmt.Errorf("%w: starting a process (%s started again as %s): %w; %s", errEvaluatorUnavailable, reexec.Self(), evaluatorProcessName, err, p.stderr.reason())
	}
	return p, nil
}

// read passes the process's answers on until its output ends, then waits
// for it.
func (p *evaluatorProcess) read(stdout io.Reader, greeted chan<- error) {
	defer close(p.exited)
	defer func() { _ = p.cmd.Wait() }()
	defer close(p.replies)
	dec := json.NewDecoder(bufio.NewReaderSize(stdout, 1<<16))
	var hello evaluatorHello
	if err := dec.Decode(&hello); err != nil {
		greeted <- fmt.Errorf("it did not greet as an evaluator: %w", err)
		return
	}
	if hello.Greeting != evaluatorGreeting {
		greeted <- fmt.Errorf("it greeted as %q, not as %q", hello.Greeting, evaluatorGreeting)
		return
	}
	greeted <- nil
	for {
		var r evaluatorResponse
		if err := dec.Decode(&r); err != nil {
			return
		}
		p.replies <- r
	}
}

// kill ends the process; why is what the evaluation under way is told.
func (p *evaluatorProcess) kill(why error) {
	p.mu.Lock()
	if p.why == nil {
		p.why = why
	}
	p.mu.Unlock()
	_ = p.cmd.Process.Kill()
	_ = p.stdin.Close()
}

// hasExited reports whether the process is gone.
func (p *evaluatorProcess) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// discard ends a process whose answers nobody will read, and forgets it.
func (pool *evaluatorPool) discard(p *evaluatorProcess) {
	p.kill(fmt.Errorf("%w: discarded", errEvaluatorEnded))
	go func() {
		for range p.replies { // until its reader ends and waits for it
		}
	}()
	pool.mu.Lock()
	delete(pool.live, p)
	pool.mu.Unlock()
}

func (pool *evaluatorPool) isClosed() bool {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	return pool.closed
}

func (pool *evaluatorPool) forget(id string) {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for p := range pool.live {
		p.forgotten = append(p.forgotten, id)
	}
}

func (pool *evaluatorPool) close() {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	pool.closed = true
	for p := range pool.live {
		p.kill(fmt.Errorf("%w: the policy engine is stopping", errEvaluatorUnavailable))
	}
}

// retire forgets a process that ended during an evaluation of policy,
// says why, and counts it.
func (pool *evaluatorPool) retire(p *evaluatorProcess, policy, reason string, err error) {
	pool.mu.Lock()
	delete(pool.live, p)
	closed := pool.closed
	pool.mu.Unlock()
	if closed {
		return
	}
	pool.engine.metrics.countEvaluatorExit(reason)
	pool.opts.Log.Error(err, "A policy evaluator process ended; the next evaluation starts another", "policy", policy, "reason", reason)
}

func (pool *evaluatorPool) session() evaluation {
	return &poolSession{pool: pool, inputs: map[*ast.Term]int{}}
}

// poolSession is one request's evaluation: it holds a slot, sends its
// process the request's evaluations at once, and takes the answers in
// order.
type poolSession struct {
	pool *evaluatorPool
	// held: the session holds a slot, whose process is proc (nil: none
	// started yet).
	held bool
	proc *evaluatorProcess
	// unavailable fails the rest of the request at once, once no
	// process could be had.
	unavailable error
	// inputs are numbered in the order first evaluated; sent are those
	// proc has (nil: proc has none of this request's).
	inputs  map[*ast.Term]int
	encoded []json.RawMessage
	sent    map[int]bool
	// planned are the evaluations to come not yet sent; inFlight, those
	// proc has been sent and not yet answered, the first timed from
	// since (zero: proc has not taken them in yet).
	planned  []plannedCall
	inFlight []plannedCall
	since    time.Time
	// learning: proc is taking the request in; what fails then is no
	// policy's.
	learning bool
}

func (s *poolSession) plan(calls []plannedCall) { s.planned = calls }

func (s *poolSession) done() {
	if !s.held {
		return
	}
	if len(s.inFlight) > 0 && s.proc != nil {
		// Answers nobody will read: the next request must not take
		// them for its own.
		s.pool.discard(s.proc)
		s.proc = nil
	}
	s.pool.free <- s.proc
	s.held = false
}

func (s *poolSession) eval(ctx context.Context, q *preparedQuery, input *ast.Term, _ ast.Value, timeout time.Duration) (rego.ResultSet, error) {
	if s.unavailable != nil {
		return nil, s.unavailable
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultTotalTimeout)
	}
	if !s.held {
		select {
		case s.proc = <-s.pool.free:
			s.held = true
		case <-ctx.Done():
			s.unavailable = fmt.Errorf("%w: none was free within the request's time limit (%w): raise policies.evaluator.processes", errEvaluatorUnavailable, ctx.Err())
			return nil, s.unavailable
		}
		if p := s.proc; p != nil && p.hasExited() {
			// Ended while idle (the kernel, short of memory): no
			// evaluation's fault.
			s.pool.retire(p, "", "crash", fmt.Errorf("%w while idle (%v): %s", errEvaluatorEnded, p.cmd.ProcessState, p.stderr.reason()))
			s.proc = nil
		}
	}
	if len(s.inFlight) == 0 {
		batch := []plannedCall{{query: q, input: input, timeout: timeout}}
		if len(s.planned) > 0 && s.planned[0].query == q && s.planned[0].input == input {
			batch, s.planned = s.planned, nil
		}
		if err := s.send(ctx, deadline, batch); err != nil {
			// This evaluation failed; the rest are sent again.
			s.planned = append(batch[1:], s.planned...)
			return nil, err
		}
	}
	if s.inFlight[0].query != q || s.inFlight[0].input != input {
		// Evaluated out of the planned order: a bug of the engine's.
		return nil, fmt.Errorf("policy evaluator: evaluation of query %s out of order", q.ID())
	}
	resp, err := s.answer(ctx, timeout, deadline)
	if err != nil {
		// The evaluations still to come start a new process, which is
		// sent them and what they need.
		s.planned = append(s.inFlight[1:], s.planned...)
		s.inFlight, s.proc, s.sent = nil, nil, nil
		if errors.Is(err, errEvaluatorUnavailable) {
			s.unavailable = err
		}
		return nil, err
	}
	s.inFlight = s.inFlight[1:]
	if resp.Error != "" {
		return nil, errorOfResponse(resp)
	}
	if resp.Bindings == nil {
		return nil, nil
	}
	var bindings map[string]any
	dec := json.NewDecoder(bytes.NewReader(resp.Bindings))
	dec.UseNumber() // as OPA's own results
	if err := dec.Decode(&bindings); err != nil {
		return nil, fmt.Errorf("reading the evaluator's result: %w", err)
	}
	return rego.ResultSet{{Bindings: bindings}}, nil
}

// send sends batch, and what its process needs for it, to the session's
// process, started first if need be, and waits until the process has
// taken it in.
func (s *poolSession) send(ctx context.Context, deadline time.Time, batch []plannedCall) error {
	if time.Until(deadline) <= 0 {
		return fmt.Errorf("evaluation exceeded the request's time limit: %w", context.DeadlineExceeded)
	}
	if err := ctx.Err(); err != nil {
		// Cancelled: no process is started for the rest.
		s.unavailable = fmt.Errorf("%w: the request was cancelled: %w", errEvaluatorUnavailable, err)
		return s.unavailable
	}
	if s.proc == nil {
		p, err := s.pool.start(deadline)
		if err != nil {
			s.unavailable = err
			return err
		}
		s.proc, s.sent = p, nil
	}
	p := s.proc
	req := evaluatorRequest{NewRequest: s.sent == nil, Deadline: deadline}
	s.pool.mu.Lock()
	forgotten := p.forgotten
	s.pool.mu.Unlock()
	req.Forget = forgotten
	prepared := map[string]bool{}
	sent := map[int]bool{}
	inventory := p.inventory
	for _, c := range batch {
		id := c.query.ID()
		if (!p.prepared[id] || slices.Contains(forgotten, id)) && !prepared[id] {
			if req.Prepare == nil {
				req.Prepare = map[string]querySource{}
			}
			req.Prepare[id] = c.query.source
			prepared[id] = true
		}
		if c.query.source.Inventory && inventory == p.inventory {
			inventory = s.pool.engine.inventory.snapshot()
			var err error
			inventoryChanges(p.inventory, inventory, func(path []string, leaf ast.Value) {
				change := inventoryChange{Path: path}
				if leaf != nil && err == nil {
					change.Object, err = valueJSON(leaf)
				}
				req.Inventory = append(req.Inventory, change)
			})
			if err != nil {
				return fmt.Errorf("sending the inventory: %w", err)
			}
		}
		n, ok := s.inputs[c.input]
		if !ok {
			raw, err := valueJSON(c.input.Value)
			if err != nil {
				return fmt.Errorf("sending the input: %w", err)
			}
			n = len(s.encoded)
			s.inputs[c.input] = n
			s.encoded = append(s.encoded, raw)
		}
		if !s.sent[n] && !sent[n] {
			if req.Inputs == nil {
				req.Inputs = map[int]json.RawMessage{}
			}
			req.Inputs[n] = s.encoded[n]
			sent[n] = true
		}
		req.Evals = append(req.Evals, evaluatorCall{Query: id, Input: n, Timeout: c.timeout})
	}
	_ = p.stdin.SetWriteDeadline(deadline)
	err := p.enc.Encode(&req)
	if err == nil {
		err = p.in.Flush()
	}
	if err != nil {
		// Gone, or not reading: no evaluation's fault.
		s.pool.discard(p)
		s.proc = nil
		return fmt.Errorf("%w: sending it the request: %w; %s", errEvaluatorUnavailable, err, p.stderr.reason())
	}
	// Sent: what the process holds now.
	// A query forgotten and prepared in one request (the engine dropped
	// it while this request still evaluated it): the process holds it,
	// and is told to forget it next time.
	var again []string
	for _, id := range forgotten {
		delete(p.prepared, id)
		if prepared[id] {
			again = append(again, id)
			delete(prepared, id)
		}
	}
	for id := range prepared {
		p.prepared[id] = true
	}
	s.pool.mu.Lock()
	p.forgotten = append(p.forgotten[len(forgotten):], again...)
	s.pool.requests++
	s.pool.mu.Unlock()
	if s.sent == nil {
		s.sent = map[int]bool{}
	}
	for n := range sent {
		s.sent[n] = true
	}
	p.inventory = inventory
	s.inFlight, s.since = batch, time.Time{}

	// Taking it in (compiling, copying the inventory) is bound by the
	// request's time limit alone, and blamed on no policy.
	s.learning = true
	resp, err := s.answer(ctx, 0, deadline)
	s.learning = false
	if err == nil && !resp.Learned {
		s.pool.discard(p)
		err = errors.New("it answered before taking the request in")
	}
	if err == nil && testHookLearned != nil {
		testHookLearned(p.cmd.Process.Pid)
	}
	if err != nil {
		s.inFlight, s.proc, s.sent = nil, nil, nil
		if !errors.Is(err, errEvaluatorUnavailable) {
			err = fmt.Errorf("%w: while it took the request in: %w", errEvaluatorUnavailable, err)
		}
		// A new process would take the same request in the same way:
		// the rest of the request fails at once.
		s.unavailable = err
		return err
	}
	return nil
}

// answer waits for the process's next answer: within timeout (0: none)
// of the answer before it (or of now, for the first) and the request's
// deadline, each with the grace, within the memory bound and ctx; a
// process that ends, or is ended, fails it.
func (s *poolSession) answer(ctx context.Context, timeout time.Duration, deadline time.Time) (evaluatorResponse, error) {
	p := s.proc
	if s.since.IsZero() {
		s.since = time.Now()
	}
	due := deadline
	if timeout > 0 {
		due = minTime(due, s.since.Add(timeout))
	}
	timer := time.NewTimer(time.Until(due.Add(evaluatorGrace)))
	defer timer.Stop()
	timeUp := timer.C
	ticker := time.NewTicker(memoryCheckInterval)
	defer ticker.Stop()
	done := ctx.Done()
	killed := false
	for {
		select {
		case r, ok := <-p.replies:
			switch {
			case !ok:
				return evaluatorResponse{}, s.ended(p)
			case killed:
				continue // its reason stands; wait for its end
			}
			s.since = time.Now()
			return r, nil
		case <-timeUp:
			timeUp = nil // once
			if killed {
				continue // its reason stands; wait for its end
			}
			select {
			case r, ok := <-p.replies: // answered as time ran out
				if ok {
					s.since = time.Now()
					return r, nil
				}
				return evaluatorResponse{}, s.ended(p)
			default:
			}
			switch {
			case s.learning:
				p.kill(fmt.Errorf("%w: %w: the process was ended", errEvaluatorUnavailable, errLearningTimedOut))
			case s.inFlight[0].timeout > 0:
				p.kill(fmt.Errorf("evaluation did not stop at its time limit (%v, or the request's): its policy evaluator process was ended: %w", s.inFlight[0].timeout, context.DeadlineExceeded))
			default:
				p.kill(fmt.Errorf("evaluation did not stop at the request's time limit: its policy evaluator process was ended: %w", context.DeadlineExceeded))
			}
			killed = true
		case <-ticker.C:
			if rss, err := residentBytes(p.cmd.Process.Pid); err == nil && rss > s.pool.opts.MemoryLimit && !killed {
				p.kill(fmt.Errorf("%w (%d MiB): %d MiB resident, it was ended", errEvaluatorMemory, s.pool.opts.MemoryLimit>>20, rss>>20))
				killed = true
			}
		case <-done:
			if ctx.Err() == context.Canceled {
				// The caller gave up: no policy's fault.
				p.kill(fmt.Errorf("%w: the request was cancelled: %w", errEvaluatorUnavailable, ctx.Err()))
				killed = true
			}
			done = nil // a deadline: the process's own limits answer
		}
	}
}

// ended waits for a process whose output ended and says why it did.
func (s *poolSession) ended(p *evaluatorProcess) error {
	<-p.exited
	p.mu.Lock()
	err := p.why
	p.mu.Unlock()
	reason := ""
	switch {
	case errors.Is(err, errEvaluatorUnavailable):
		// Ended by the engine for no evaluation's fault (stopping,
		// cancelled, too slow to take a request in).
		if errors.Is(err, errLearningTimedOut) {
			reason = "timeout"
		}
	case err == nil:
		err, reason = fmt.Errorf("%w (%v): %s", errEvaluatorEnded, p.cmd.ProcessState, p.stderr.reason()), "crash"
	case errors.Is(err, errEvaluatorMemory):
		reason = "memory"
	case errors.Is(err, context.DeadlineExceeded):
		reason = "timeout"
	}
	var policy string
	if len(s.inFlight) > 0 && !s.learning {
		policy = s.inFlight[0].policy
	}
	if reason != "" {
		s.pool.retire(p, policy, reason, err)
	} else {
		s.pool.mu.Lock()
		delete(s.pool.live, p)
		s.pool.mu.Unlock()
	}
	return err
}

// tailBuffer keeps the last max bytes written to it: a Go fatal error
// prints its reason first and the goroutines after, so the reason is kept
// by its line.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	first string // the first fatal error or panic
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if end := bytes.LastIndexByte(t.buf, '\n'); t.first == "" && end >= 0 {
		// Whole lines only: a line may come in two writes.
		for _, line := range strings.Split(string(t.buf[:end]), "\n") {
			if strings.HasPrefix(line, "fatal error: ") || strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "inplace-policy-evaluator: ") {
				t.first = line
				break
			}
		}
	}
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(b), nil
}

// reason is the process's own words for why it ended: the first fatal
// error or panic it printed, else its last line.
func (t *tailBuffer) reason() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.first != "" {
		return t.first
	}
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return last
	}
	return "it printed nothing"
}
