package protocol

import (
	"errors"
	"math"
	"strconv"
)

// Epoch is an epoch of the in-place restart protocol, counted from 1; 0
// means none. Upstream JobSet numbers the same epochs as in-place restart
// attempts, counted from 0: attempt = epoch - 1. Every conversion between
// the two and every reading and writing of an epoch as text goes through
// this type, so that the controller, the agents and inplacectl cannot
// disagree by one on what a Pod, a broadcast or a status says:
//
//	epoch   0     1  2  3 …   status.syncedEpoch, status.deprecatedEpoch,
//	                          the broadcast, jobset.sigs.k8s.io/epoch
//	attempt unset 0  1  2 …   status.currentInPlaceRestartAttempt,
//	                          status.previousInPlaceRestartAttempt,
//	                          jobset.sigs.k8s.io/in-place-restart-attempt
type Epoch int32

// attempt is the one definition of the epoch's attempt.
func (e Epoch) attempt() int32 { return int32(e) - 1 }

// epochOfAttempt is the one definition of an attempt's epoch.
func epochOfAttempt(a int32) Epoch { return Epoch(a + 1) }

// Attempt is the epoch as upstream's status fields hold it: its attempt,
// or nil for none (epoch 0).
func (e Epoch) Attempt() *int32 {
	if e == 0 {
		return nil
	}
	a := e.attempt()
	return &a
}

// EpochOfAttempt is the epoch one of upstream's status fields stands for:
// the attempt's, or 0 (none) when the field is unset. The API server
// refuses a negative attempt, and so it is not checked here (the largest
// int32, which its schema admits, wraps: no JobSet restarts that often);
// an attempt read from anywhere else is checked by EpochOfAttemptNumber.
func EpochOfAttempt(a *int32) Epoch {
	if a == nil {
		return 0
	}
	return epochOfAttempt(*a)
}

// EpochOfAttemptNumber is the epoch of an attempt read as a number from
// an object no schema checked (an unstructured JobSet): an error for a
// negative attempt, or one whose epoch is beyond int32.
func EpochOfAttemptNumber(a int64) (Epoch, error) {
	if a < 0 || a >= math.MaxInt32 {
		return 0, errNotAttempt
	}
	return epochOfAttempt(int32(a)), nil
}

// String is the epoch as the broadcast, the epoch annotation, the
// supervisors' queries and the agents' other annotations write it.
func (e Epoch) String() string {
	return strconv.Itoa(int(e))
}

// AttemptString is the epoch as upstream's in-place-restart-attempt
// annotation writes it. An agent reports an epoch of 1 or more, whose
// attempt is 0 or more; epoch 0 has none, and would read "-1".
func (e Epoch) AttemptString() string {
	return strconv.Itoa(int(e.attempt()))
}

// ParseEpoch parses an epoch as String writes it: the broadcast's epochs,
// our epoch annotation (jobset.sigs.k8s.io/epoch) and the agents' other
// numbers. Every reader of them (the controller, the agents, inplacectl)
// parses them here, so that they agree on what a Pod reports.
func ParseEpoch(value string) (Epoch, error) {
	n, err := parseNumber(value)
	return Epoch(n), err
}

// ParseAttempt parses upstream JobSet's in-place-restart-attempt
// annotation, as AttemptString writes it, into the epoch it stands for.
func ParseAttempt(value string) (Epoch, error) {
	n, err := parseNumber(value)
	if err != nil {
		return 0, err
	}
	return EpochOfAttemptNumber(int64(n))
}

// parseNumber is the one parser of the protocol's numbers as text: a
// non-negative int32 in decimal, without spaces (strconv.ParseInt's
// syntax, which takes a leading "+").
func parseNumber(value string) (int32, error) {
	n, err := strconv.ParseInt(value, 10, 32)
	if err != nil || n < 0 {
		return 0, errNotEpoch
	}
	return int32(n), nil
}

var (
	errNotEpoch   = errors.New("not a non-negative 32-bit number")
	errNotAttempt = errors.New("not an attempt: want a non-negative 32-bit number below the largest")
)

// ReasonRestartingAllContainers is the reason the kubelet gives the
// containers it stopped to restart every container of their Pod in place
// (RestartAllContainers): not an exit of their own. The controller reads it
// to tell a worker's exit from the restart, and an agent to tell a restart
// of its whole Pod from a crash of its own.
const ReasonRestartingAllContainers = "RestartingAllContainers"
