package protocol

import (
	"errors"
	"math"
	"strconv"
)

// ParseEpoch parses the value of a Pod's epoch annotation: ours
// (jobset.sigs.k8s.io/epoch) counts from 1, 0 meaning none; upstream
// JobSet's attempt (jobset.sigs.k8s.io/in-place-restart-attempt, fromZero)
// counts from 0 and is returned as the epoch attempt + 1. Every reader of
// the annotation (the controller, the agents, inplacectl) parses it here,
// so that they agree on what a Pod reports.
func ParseEpoch(value string, fromZero bool) (int32, error) {
	n, err := strconv.ParseInt(value, 10, 32)
	switch {
	case err != nil || n < 0:
		return 0, errNotEpoch
	case fromZero && n == math.MaxInt32:
		return 0, errNotEpoch
	case fromZero:
		return int32(n) + 1, nil
	}
	return int32(n), nil
}

var errNotEpoch = errors.New("not a non-negative 32-bit number")

// ReasonRestartingAllContainers is the reason the kubelet gives the
// containers it stopped to restart every container of their Pod in place
// (RestartAllContainers): not an exit of their own. The controller reads it
// to tell a worker's exit from the restart, and an agent to tell a restart
// of its whole Pod from a crash of its own.
const ReasonRestartingAllContainers = "RestartingAllContainers"
