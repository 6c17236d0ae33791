package v1alpha2

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file says where a JobSet stands on its restart path, from the
// JobSet alone: one value that the controller decides on, logs and times
// in its metrics, that inplacectl status shows and that inplacectl migrate
// reads, so that none of them answers "is it restarting?" by a rule of its
// own.

// InPlace reports whether the JobSet's restart strategy is InPlaceRestart,
// whether or not in-place restarts are disabled (InPlaceActive).
func InPlace(js *JobSet) bool {
	return js.Spec.FailurePolicy != nil && js.Spec.FailurePolicy.RestartStrategy == InPlaceRestart
}

// InPlaceActive reports whether the JobSet restarts in place: InPlaceRestart
// without upstream JobSet's disable-in-place-restart annotation. A JobSet
// with it still has its broadcast (its agents stand aside), but no agents'
// grants, no epochs decided, and the startup order of any other JobSet.
func InPlaceActive(js *JobSet) bool {
	_, disabled := js.Annotations[DisableInPlaceRestartKey]
	return InPlace(js) && !disabled
}

// Reasons of the JobSetRestarting condition while an in-place restart is
// under way, which the in-place timeout bounds. The controller sets the
// condition with the restart and closes it, with another reason, when the
// group syncs, the restart falls back to recreating the Jobs, the JobSet
// is suspended or it finishes.
const (
	// ReasonInPlaceRestart: a member of the synced group failed or left,
	// and every Pod restarts in place.
	ReasonInPlaceRestart = "InPlaceRestart"
	// ReasonInPlaceScale: the group restarts in place at a new size after
	// its replicated jobs were scaled; not counted towards maxRestarts.
	ReasonInPlaceScale = "InPlaceRestartForScale"
)

// RestartState is where a JobSet stands on its restart path.
//
//	Starting ──▶ Running ◀──▶ Restarting
//	    │         ▲    │          │
//	    │         │    ▼          │
//	    └──────▶ Recreating ◀─────┘
//
//	Suspended: from any of these four, and back to Starting (InPlaceRestart),
//	Running, or Recreating when a recreation was under way.
//	Failed, Completed: final, from any state.
//
// The moves the controller makes, one row each, are its table of
// transitions (controller/decide/restartstate.go).
type RestartState string

const (
	// StateStarting: an InPlaceRestart JobSet whose Pods have not synced
	// an epoch since they started (its first start, after a resume, or
	// taken over from upstream JobSet during an in-place restart): every
	// Pod must report before any barrier lifts.
	StateStarting RestartState = "Starting"
	// StateRunning: the group is synced (InPlaceRestart), or the Jobs run.
	StateRunning RestartState = "Running"
	// StateRestarting: an in-place restart is under way (Restarting with
	// an in-place reason): its timeout runs.
	StateRestarting RestartState = "Restarting"
	// StateRecreating: the Jobs of an earlier attempt are being replaced
	// (Restarting with any other reason).
	StateRecreating RestartState = "Recreating"
	// StateSuspended: the JobSet is suspended; its Jobs have no Pods.
	StateSuspended RestartState = "Suspended"
	StateFailed    RestartState = "Failed"
	StateCompleted RestartState = "Completed"
)

// InPlaceRestarting reports whether an in-place restart is under way: its
// Pods stop and start again at the next epoch, and its timeout runs.
func (s RestartState) InPlaceRestarting() bool {
	return s == StateRestarting
}

// RestartUnderWay reports whether a restart is under way, in place or by
// recreating the Jobs.
func (s RestartState) RestartUnderWay() bool {
	return s == StateRestarting || s == StateRecreating
}

// RestartStateOf is where js stands when its status is status: the one
// that was read, or one decided and not yet written. It reads, in order,
// the terminal state (as Finished does), the Suspended condition, the
// Restarting condition (an in-place reason: Restarting; any other:
// Recreating) and then the epochs.
//
// The order is the point. The epochs alone (deprecatedEpoch >=
// syncedEpoch > 0) do not tell an in-place restart from a suspension: a
// suspension ends the synced epoch without a restart by deprecating it,
// so that the Pods started on resume sync a fresh one. A suspended
// JobSet is Suspended, not restarting in place: its Pods are gone, and no
// in-place timeout may recreate the Jobs of a JobSet that does not run.
// Resumed, it is Starting, as on a first start: its new Pods sync behind
// the barrier, and an agent that crash-loops is bounded by maxRestarts,
// not by the in-place timeout. Only the Restarting condition, which the
// controller sets with an in-place restart and closes when it ends, says
// that one is under way.
//
// A status upstream JobSet wrote last has no epochs: its in-place restart
// attempts stand for them (WrittenByUpstream, UpstreamEpochs), as they do
// for the controller, which goes on from them.
func RestartStateOf(js *JobSet, status *JobSetStatus) RestartState {
	switch {
	case status.TerminalState == TerminalStateFailed,
		status.TerminalState == "" && meta.IsStatusConditionTrue(status.Conditions, string(JobSetFailed)):
		return StateFailed
	case Finished(status):
		return StateCompleted
	case meta.IsStatusConditionTrue(status.Conditions, string(JobSetSuspended)):
		return StateSuspended
	}
	if c := meta.FindStatusCondition(status.Conditions, string(JobSetRestarting)); c != nil && c.Status == metav1.ConditionTrue {
		if c.Reason == ReasonInPlaceRestart || c.Reason == ReasonInPlaceScale {
			return StateRestarting
		}
		return StateRecreating
	}
	if deprecated, synced := epochsOf(status); InPlaceActive(js) && synced <= deprecated {
		return StateStarting
	}
	return StateRunning
}

// epochsOf is the status's epochs, or those upstream's attempts stand for
// in a status upstream JobSet wrote last.
func epochsOf(s *JobSetStatus) (deprecated, synced int32) {
	if WrittenByUpstream(s) {
		return UpstreamEpochs(s)
	}
	return s.DeprecatedEpoch, s.SyncedEpoch
}
