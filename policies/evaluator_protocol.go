package policies

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// The protocol between the engine and an evaluator process: one JSON
// object per line on the child's standard input, and on its standard
// output one once it has taken the request in, then one per evaluation, in
// order, each as soon as it is done. The
// child first writes a greeting; then every request carries evaluations,
// and what the child must learn before them: queries to forget and to
// prepare, the changes to data.inventory since the child's last request,
// and the inputs not yet sent.

// evaluatorGreeting is the first line an evaluator process writes.
const evaluatorGreeting = "inplace-policy-evaluator/v1"

type evaluatorHello struct {
	Greeting string `json:"greeting"`
}

type evaluatorRequest struct {
	// Forget names queries the engine no longer holds.
	Forget []string `json:"forget,omitempty"`
	// Prepare are queries the child has not prepared yet, by ID.
	Prepare map[string]querySource `json:"prepare,omitempty"`
	// Inventory are the changes to data.inventory, in order.
	Inventory []inventoryChange `json:"inventory,omitempty"`
	// NewRequest: the inputs of earlier requests are no longer used.
	NewRequest bool `json:"newRequest,omitempty"`
	// Inputs of this request, by number.
	Inputs map[int]json.RawMessage `json:"inputs,omitempty"`
	// Deadline is the request's, on the wall clock the engine and the
	// process share: the time the request takes to reach it is the
	// request's.
	Deadline time.Time       `json:"deadline"`
	Evals    []evaluatorCall `json:"evals"`
}

// inventoryChange sets the object at Path, or removes what is at Path
// when Object is absent.
type inventoryChange struct {
	Path   []string        `json:"path"`
	Object json.RawMessage `json:"object,omitempty"`
}

type evaluatorCall struct {
	Query string `json:"query"`
	Input int    `json:"input"`
	// Timeout is the policy's limit (0: none but the request's).
	Timeout time.Duration `json:"timeout"`
}

type evaluatorResponse struct {
	// Learned: the process took in the request, and evaluates.
	Learned bool `json:"learned,omitempty"`
	// Bindings of the query's first result; absent when it has none.
	Bindings json.RawMessage `json:"bindings,omitempty"`
	// Error of the evaluation, and its kind (failureKind).
	Error string      `json:"error,omitempty"`
	Kind  failureKind `json:"kind,omitempty"`
}

// remoteError is an evaluation error the evaluator process reported,
// with the cause errors.Is finds for its kind, as in this process.
type remoteError struct {
	msg   string
	cause error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.cause }

func errorOfResponse(r evaluatorResponse) error {
	if r.Error == "" {
		return nil
	}
	switch r.Kind {
	case failedTimeout:
		return &remoteError{msg: r.Error, cause: context.DeadlineExceeded}
	case failedPanic:
		return &remoteError{msg: r.Error, cause: errPanicked}
	default:
		return errors.New(r.Error)
	}
}
