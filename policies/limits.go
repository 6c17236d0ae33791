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
// millisecond (docs/explanation/performance.md). The limits are wall time, so they
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
	// failedCrash: the evaluator process ended during the evaluation
	// (a Go fatal error, a kill by the kernel).
	failedCrash failureKind = "crash"
	// failedMemory: the evaluator process passed its memory limit.
	failedMemory failureKind = "memory"
	// failedUnavailable: no evaluator process could take the evaluation
	// in (none free in time, none started): no fault of the policy's.
	failedUnavailable failureKind = "unavailable"
)

// errPanicked wraps a panic recovered from an evaluation.
var errPanicked = errors.New("evaluation panicked")

// kindOf classifies an evaluation error.
func kindOf(err error) failureKind {
	switch {
	case errors.Is(err, errEvaluatorUnavailable):
		return failedUnavailable
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return failedTimeout
	case errors.Is(err, errPanicked):
		return failedPanic
	case errors.Is(err, errEvaluatorMemory):
		return failedMemory
	case errors.Is(err, errEvaluatorEnded):
		return failedCrash
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

// policyHealth counts one policy version's evaluations that failed, or
// succeeded, in a row. Each Policy holds its own, so that the admission
// path takes no lock shared by every policy, and a new version starts
// afresh by being a new Policy (SetPolicy hands the same generation's on).
type policyHealth struct {
	mu sync.Mutex
	// evaluated: at least one evaluation was observed.
	evaluated           bool
	failures, successes int
	failing             bool
	last                failureKind
	message             string
}

// observe records one evaluation's outcome and reports whether the
// policy started or stopped failing.
func (h *policyHealth) observe(err error) (changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.evaluated = true
	wasFailing := h.failing
	if err == nil {
		h.failures, h.successes = 0, h.successes+1
		if h.failing && h.successes >= healthyAfter {
			h.failing = false
		}
	} else {
		h.failures, h.successes = h.failures+1, 0
		h.last, h.message = kindOf(err), err.Error()
		if h.failures >= unhealthyAfter {
			h.failing = true
		}
	}
	return wasFailing != h.failing
}

func (h *policyHealth) get() Health {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failing {
		return Health{Evaluated: h.evaluated}
	}
	return Health{Evaluated: true, Failing: true, Reason: string(h.last), Message: h.message}
}

// Health returns how the recent evaluations of the admin policy in force
// under that name went.
func (e *Engine) Health(policy string) Health {
	for _, p := range *e.admin.Load() {
		if p.Name == policy {
			return p.health.get()
		}
	}
	return Health{}
}

// OnHealthChange calls fn with a policy's name when it starts or stops
// failing, so that its status can say so. Call it before the engine is
// used.
func (e *Engine) OnHealthChange(fn func(policy string)) { e.onHealthChange = fn }

// message is one message of a policy, and whether it is inexact (see
// Violation.Inexact).
type message struct {
	text    string
	inexact bool
	failed  bool
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
		out = append(out, message{text: Truncate(m, maxMessageBytes), inexact: true})
	}
	return out
}

// cutMark ends a text Truncate cut.
const cutMark = "... (cut)"

// Truncate returns s if it holds at most n bytes, else its first bytes,
// cut at a rune's start, and cutMark, n bytes at the most in all.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n-len(cutMark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + cutMark
}
