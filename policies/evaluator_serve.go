package policies

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/moby/sys/reexec"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"
)

// evaluatorProcessName is the argv[0] under which a binary that embeds
// the engine serves as its evaluator process.
const evaluatorProcessName = "inplace-policy-evaluator"

// The package's one init. It bounds the builtins, then lets every binary
// that embeds the engine (the manager, inplacectl, a test) serve as its
// own evaluator process: started again under evaluatorProcessName, it
// serves and exits here, before its main or its tests run, so that no
// main needs to know. A test file's init runs after this one: a builtin
// a test registers exists in its own process, not in its evaluators.
func init() {
	registerBounds()
	reexec.Register(evaluatorProcessName, func() {
		if err := serveEvaluator(os.Args[1:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "inplace-policy-evaluator:", err)
			os.Exit(1)
		}
		os.Exit(0)
	})
	reexec.Init()
}

// serveEvaluator evaluates what the engine asks on in, answering on out,
// until in ends. args are `-memory-limit BYTES -max-stack BYTES`.
func serveEvaluator(args []string, in io.Reader, out io.Writer) error {
	for i := 0; i+1 < len(args); i += 2 {
		n, err := strconv.ParseInt(args[i+1], 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("%s: %q is not a positive number of bytes", args[i], args[i+1])
		}
		switch args[i] {
		case "-memory-limit":
			// The engine ends this process at the limit; collect
			// garbage harder before it does.
			debug.SetMemoryLimit(n / 4 * 3)
		case "-max-stack":
			// A recursion without end fails at this depth, in
			// milliseconds, rather than at the runtime's 1 GB.
			debug.SetMaxStack(int(n))
		default:
			return fmt.Errorf("unknown argument %s", args[i])
		}
	}
	// Under the memory of its container, the kernel ends an evaluator
	// before the engine's process.
	preferToBeKilled()
	dec := json.NewDecoder(bufio.NewReaderSize(in, 1<<16))
	dec.UseNumber()
	w := bufio.NewWriterSize(out, 1<<16)
	enc := json.NewEncoder(w)
	if err := enc.Encode(evaluatorHello{Greeting: evaluatorGreeting}); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	s := &evaluatorServer{queries: map[string]*servedQuery{}, inputs: map[int]*ast.Term{}, inventory: NewInventory(0)}
	for {
		var req evaluatorRequest
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading a request: %w", err)
		}
		// Each answer as soon as it is done: the engine times each
		// evaluation from the answer before it.
		if err := s.serve(&req, func(r evaluatorResponse) error {
			if err := enc.Encode(r); err != nil {
				return err
			}
			return w.Flush()
		}); err != nil {
			return err
		}
	}
}

// evaluatorServer is an evaluator process's state: what the engine has
// sent it so far.
type evaluatorServer struct {
	queries   map[string]*servedQuery
	inputs    map[int]*ast.Term
	inventory *Inventory
}

type servedQuery struct {
	*preparedQuery
	params ast.Value
	// err: the query did not compile here, though it did in the engine.
	err error
}

// serve learns what req says, says so, and answers each of req's
// evaluations. What it cannot learn ends the process: the engine would no
// longer know what it holds.
func (s *evaluatorServer) serve(req *evaluatorRequest, answer func(evaluatorResponse) error) error {
	deadline := req.Deadline
	if err := s.learn(req); err != nil {
		return err
	}
	// The engine times each evaluation from this answer, or the one
	// before it: what it took to learn is no policy's.
	if err := answer(evaluatorResponse{Learned: true}); err != nil {
		return err
	}
	for _, call := range req.Evals {
		if err := answer(s.eval(deadline, call)); err != nil {
			return err
		}
	}
	return nil
}

// learn takes in what req says the process must know. A query that does
// not compile fails its own evaluations alone.
func (s *evaluatorServer) learn(req *evaluatorRequest) error {
	for _, id := range req.Forget {
		delete(s.queries, id)
	}
	changes := make([]inventoryLeaf, 0, len(req.Inventory))
	for _, c := range req.Inventory {
		var leaf ast.Value
		if c.Object != nil {
			v, err := jsonValue(c.Object)
			if err != nil {
				return fmt.Errorf("reading an inventory object: %w", err)
			}
			leaf = v
		}
		changes = append(changes, inventoryLeaf{c.Path, leaf})
	}
	s.inventory.mirror(changes)
	for id, src := range req.Prepare {
		q, err := s.prepare(src)
		if err != nil {
			q = &servedQuery{err: err}
		}
		s.queries[id] = q
	}
	if req.NewRequest {
		clear(s.inputs)
	}
	for n, raw := range req.Inputs {
		v, err := jsonValue(raw)
		if err != nil {
			return fmt.Errorf("reading the input: %w", err)
		}
		s.inputs[n] = ast.NewTerm(v)
	}
	return nil
}

func (s *evaluatorServer) eval(deadline time.Time, call evaluatorCall) evaluatorResponse {
	q, ok := s.queries[call.Query]
	if !ok {
		return failed(fmt.Errorf("query %s was never prepared", call.Query))
	}
	if q.err != nil {
		return failed(q.err)
	}
	input, ok := s.inputs[call.Input]
	if !ok {
		return failed(fmt.Errorf("input %d was never sent", call.Input))
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	rs, err := evalBounded(ctx, q.PreparedEvalQuery, withParameters(input.Value, q.params), call.Timeout)
	if err != nil {
		return failed(err)
	}
	if len(rs) == 0 {
		return evaluatorResponse{}
	}
	raw, err := json.Marshal(rs[0].Bindings)
	if err != nil {
		return failed(fmt.Errorf("encoding the result: %w", err))
	}
	return evaluatorResponse{Bindings: raw}
}

func (s *evaluatorServer) prepare(src querySource) (*servedQuery, error) {
	version := ast.RegoV1
	if src.RegoV0 {
		version = ast.RegoV0
	}
	var inventory *Inventory
	if src.Inventory {
		inventory = s.inventory
	}
	q, err := prepare(src.Modules, src.Query, version, inventory)
	if err != nil {
		return nil, fmt.Errorf("preparing a query the engine prepared: %w", err)
	}
	sq := &servedQuery{preparedQuery: q}
	if src.Parameters != nil {
		if sq.params, err = jsonValue(src.Parameters); err != nil {
			return nil, fmt.Errorf("reading the parameters: %w", err)
		}
	}
	return sq, nil
}

func failed(err error) evaluatorResponse {
	return evaluatorResponse{Error: err.Error(), Kind: kindOf(err)}
}

// jsonValue reads JSON into an AST value, numbers kept exact.
func jsonValue(raw json.RawMessage) (ast.Value, error) {
	var x any
	if err := util.UnmarshalJSON(raw, &x); err != nil {
		return nil, err
	}
	return ast.InterfaceToValue(x)
}
