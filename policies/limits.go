package policies

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"
)

// Limits bound what one evaluation may cost. A policy runs on the
// admission path of every JobSet, behind a webhook that fails closed: one
// that never finishes would stop every JobSet create in the cluster, and a
// slow one would use up the webhook's 10-second timeout for all the
// others.
type Limits struct {
	// PolicyTimeout bounds one policy on one JobSet. A policy that
	// exceeds it has failed: a Deny policy then denies, a Warn or DryRun
	// policy warns or records (see Policy.eval).
	PolicyTimeout time.Duration
	// TotalTimeout bounds every policy on one JobSet, together.
	TotalTimeout time.Duration
}

// Defaults: a policy on the admission path takes microseconds to a
// millisecond (docs/performance.md). The limits are wall time, so they
// are far above any honest policy: a replica starved of CPU must not fail
// one. 5 s for all of them leaves the webhook's 10 s room for the rest.
const (
	DefaultPolicyTimeout = time.Second
	DefaultTotalTimeout  = 5 * time.Second
)

// DefaultLimits are the limits of an engine that was not given any.
func DefaultLimits() Limits {
	return Limits{PolicyTimeout: DefaultPolicyTimeout, TotalTimeout: DefaultTotalTimeout}
}

// Output limits: what one policy may say about one JobSet. The messages
// go into the admission response, the warnings kubectl prints, Events
// and the audit status; a policy that emits a message per Pod of a large
// JobSet would otherwise make each of them as large.
const (
	maxMessagesPerPolicy = 20
	maxMessageBytes      = 1024
)

// unhealthyAfter is how many evaluations in a row must fail before a
// policy is reported unhealthy: one slow request is noise, three in a row
// is the policy. healthyAfter is how many in a row must succeed before it
// is healthy again: a policy that fails on some JobSets only must not
// flap with each request.
const (
	unhealthyAfter = 3
	healthyAfter   = 10
)

// Limits returns the engine's limits.
func (e *Engine) Limits() Limits { return e.limits }

// SetLimits sets the engine's limits; a zero field keeps its default.
// Call it before the engine is used.
func (e *Engine) SetLimits(l Limits) {
	d := DefaultLimits()
	if l.PolicyTimeout <= 0 {
		l.PolicyTimeout = d.PolicyTimeout
	}
	if l.TotalTimeout <= 0 {
		l.TotalTimeout = d.TotalTimeout
	}
	e.limits = l
}

// failureKind says why an evaluation failed, for metrics and status.
type failureKind string

const (
	failedTimeout failureKind = "timeout"
	failedPanic   failureKind = "panic"
	failedError   failureKind = "error"
)

// errPanicked wraps a panic recovered from an evaluation.
var errPanicked = errors.New("evaluation panicked")

// kindOf classifies an evaluation error.
func kindOf(err error) failureKind {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return failedTimeout
	case errors.Is(err, errPanicked):
		return failedPanic
	default:
		return failedError
	}
}

// Health is how a policy's recent evaluations went, in this process.
type Health struct {
	// Evaluated: this process has evaluated the policy's current version.
	Evaluated bool
	// Failing: unhealthyAfter evaluations in a row failed, and fewer than
	// healthyAfter in a row succeeded since.
	Failing bool
	// Reason is the kind of the last failure (timeout, panic, error) and
	// Message its error, when Failing.
	Reason  string
	Message string
}

// healthBook counts each policy's failures in a row.
type healthBook struct {
	mu sync.Mutex
	by map[string]*policyHealth
	// onChange is called, outside the lock, when a policy starts or stops
	// failing.
	onChange func(policy string)
}

type policyHealth struct {
	// failures and successes in a row; failing flips after enough of the
	// other kind.
	failures, successes int
	failing             bool
	last                failureKind
	message             string
}

// observe records one evaluation's outcome.
func (h *healthBook) observe(policy string, err error) {
	h.mu.Lock()
	if h.by == nil {
		h.by = map[string]*policyHealth{}
	}
	p := h.by[policy]
	if p == nil {
		p = &policyHealth{}
		h.by[policy] = p
	}
	wasFailing := p.failing
	if err == nil {
		p.failures, p.successes = 0, p.successes+1
		if p.failing && p.successes >= healthyAfter {
			p.failing = false
		}
	} else {
		p.failures, p.successes = p.failures+1, 0
		p.last, p.message = kindOf(err), err.Error()
		if p.failures >= unhealthyAfter {
			p.failing = true
		}
	}
	changed := wasFailing != p.failing
	notify := h.onChange
	h.mu.Unlock()
	if changed && notify != nil {
		notify(policy)
	}
}

func (h *healthBook) of(policy string) Health {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.by[policy]
	switch {
	case p == nil:
		return Health{}
	case !p.failing:
		return Health{Evaluated: true}
	}
	return Health{Evaluated: true, Failing: true, Reason: string(p.last), Message: p.message}
}

func (h *healthBook) forget(policy string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.by, policy)
}

// Health returns how the policy's recent evaluations went.
func (e *Engine) Health(policy string) Health { return e.health.of(policy) }

// OnHealthChange calls fn with a policy's name when it starts or stops
// failing, so that its status can say so. Call it before the engine is
// used.
func (e *Engine) OnHealthChange(fn func(policy string)) {
	e.health.mu.Lock()
	defer e.health.mu.Unlock()
	e.health.onChange = fn
}

// message is one message of a policy, and whether it is inexact (see
// Violation.Inexact).
type message struct {
	text    string
	inexact bool
}

// bounded returns at most maxMessagesPerPolicy messages, each cut to
// maxMessageBytes, and a last one saying how many more there were.
func bounded(msgs []string) []message {
	out := make([]message, 0, min(len(msgs), maxMessagesPerPolicy+1))
	for i, m := range msgs {
		if i == maxMessagesPerPolicy {
			out = append(out, message{text: fmt.Sprintf("... and %d more", len(msgs)-maxMessagesPerPolicy), inexact: true})
			break
		}
		if len(m) <= maxMessageBytes {
			out = append(out, message{text: m})
			continue
		}
		cut := maxMessageBytes
		for cut > 0 && !utf8.RuneStart(m[cut]) {
			cut--
		}
		out = append(out, message{text: m[:cut] + "... (cut)", inexact: true})
	}
	return out
}
