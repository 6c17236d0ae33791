package decide

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// RestartState is where a JobSet stands on its restart path. It is a
// function of the JobSet's status (and whether it restarts in place)
// alone, so that a reconcile, a log line and a test all name it the same
// way; decide moves a JobSet only along the transitions below.
type RestartState string

const (
	// stateStarting: an InPlaceRestart JobSet whose Pods have not synced
	// an epoch yet (its first start, after a recreation or a resume): every
	// Pod must report before any barrier lifts.
	stateStarting RestartState = "Starting"
	// stateRunning: the group is synced (InPlaceRestart), or the Jobs run.
	stateRunning RestartState = "Running"
	// stateRestarting: an in-place restart is under way, counted when it
	// began (Restarting with an in-place reason).
	stateRestarting RestartState = "Restarting"
	// stateRecreating: the Jobs of an earlier attempt are being replaced
	// (Restarting with any other reason).
	stateRecreating RestartState = "Recreating"
	// stateSuspended: the JobSet is suspended; its Jobs have no Pods.
	stateSuspended RestartState = "Suspended"
	stateFailed    RestartState = "Failed"
	stateCompleted RestartState = "Completed"
)

// RestartStateOf computes a JobSet's state from a status: the terminal
// state first, then a suspension, then a restart under way, then
// the epochs.
func RestartStateOf(js *jobset.JobSet, status *jobset.JobSetStatus) RestartState {
	switch {
	case status.TerminalState == jobset.TerminalStateFailed:
		return stateFailed
	case status.TerminalState == jobset.TerminalStateCompleted:
		return stateCompleted
	case conditionTrue(status, jobset.JobSetSuspended):
		return stateSuspended
	}
	if inPlaceRestartCondition(status) != nil {
		return stateRestarting
	}
	if conditionTrue(status, jobset.JobSetRestarting) {
		return stateRecreating
	}
	if jobset.InPlaceActive(js) && status.SyncedEpoch <= status.DeprecatedEpoch {
		return stateStarting
	}
	return stateRunning
}

// inPlaceRestartCondition returns the Restarting condition of an in-place
// restart under way (True, with an in-place reason, whose timeout bounds
// it), or nil.
func inPlaceRestartCondition(status *jobset.JobSetStatus) *metav1.Condition {
	c := meta.FindStatusCondition(status.Conditions, string(jobset.JobSetRestarting))
	if c == nil || c.Status != metav1.ConditionTrue || !inPlaceReason(c.Reason) {
		return nil
	}
	return c
}

// transition is one move of a JobSet along its restart path.
type transition struct {
	from, to RestartState
	// on is what makes it, where decide sees it.
	on string
	// counted: the move may count a restart towards maxRestarts (it does
	// not when the failure policy's action ignores maxRestarts, for a
	// scale, or when the Job's podFailurePolicy ignores the loss). A move
	// whose row says false never counts one; the tests check both.
	counted bool
}

// transitions are every move decide makes, read top to bottom. Staying in
// a state is not listed, but for the one stay that counts a restart.
// Failed and Completed are final. The carry-over of the status upstream
// JobSet left (adoptUpstream) comes before any move and is none: the
// restarts it counts were made under upstream.
var transitions = []transition{
	// The first start, and every start after a recreation or a resume.
	{stateStarting, stateRunning, "every expected Pod reports the same epoch: syncedEpoch moves to it and the barriers lift, in startup order (decideEpochs)", false},
	{stateStarting, stateRecreating, "a Job fails and the failure policy restarts the JobSet (applyFailure)", true},
	{stateStarting, stateFailed, "a Job fails and the failure policy fails the JobSet, or an agent restarted more than maxRestarts times before the first sync (crashLoop)", false},
	{stateStarting, stateSuspended, "spec.suspend: the Jobs are suspended, and the Pods not yet synced stop (suspendEpochs)", false},
	{stateStarting, stateCompleted, "the success policy is met", false},

	// A synced group.
	{stateRunning, stateRestarting, "a worker exits, a Pod fails or is deleted, an agent moves to a new epoch, or a Pod is missing: the synced epoch is deprecated and every Pod restarts in place (lostMember); also RestartJob, whose other Pods restart in place around the recreated Job (applyFailure); and a scale, not counted (InPlaceRestartForScale)", true},
	{stateRunning, stateRunning, "every Pod restarted and reported the next epoch before a restart began (their kubelets' restart rules, while a restart was held for a fatal exit): the group syncs, and the restart it made is counted (decideEpochs)", true},
	{stateRunning, stateRecreating, "a Job fails and the failure policy restarts the JobSet; or a member must restart while another's Pod has finished, which cannot restart in place (InPlaceRestartImpossible)", true},
	{stateRunning, stateFailed, "a Job fails and the failure policy fails the JobSet, or a restart is due with maxRestarts reached (ReachedMaxRestarts)", false},
	{stateRunning, stateSuspended, "spec.suspend (Kueue's admission and preemption): the Pods stop, the synced epoch ends without a restart (suspendEpochs)", false},
	{stateRunning, stateCompleted, "the success policy is met", false},

	// An in-place restart under way.
	{stateRestarting, stateRunning, "every Pod reports the next epoch: the group syncs and the restart ends (InPlaceRestartCompleted)", false},
	{stateRestarting, stateRecreating, "the restart does not converge within the in-place timeout (InPlaceRestartTimedOut, counted when it began), or a Job fails and the failure policy restarts the JobSet", false},
	{stateRestarting, stateFailed, "a Job fails and the failure policy fails the JobSet", false},
	{stateRestarting, stateSuspended, "spec.suspend: the restart ends without a recreation (InPlaceRestartSuspended)", false},
	{stateRestarting, stateCompleted, "the success policy is met", false},

	// A recreation under way.
	{stateRecreating, stateRunning, "the new Jobs are ready (JobsReady), or under InPlaceRestart their Pods sync an epoch", false},
	{stateRecreating, stateFailed, "a new Job fails and the failure policy fails the JobSet", false},
	{stateRecreating, stateSuspended, "spec.suspend", false},
	{stateRecreating, stateCompleted, "the success policy is met", false},

	// A suspended JobSet.
	{stateSuspended, stateStarting, "spec.suspend cleared (Kueue admits): the Jobs resume with the Pod template as it is now, and the new Pods sync a fresh epoch (resumedJob)", false},
	{stateSuspended, stateRunning, "spec.suspend cleared: without InPlaceRestart the Jobs resume; with it, when the new Pods have synced already", false},
	{stateSuspended, stateRecreating, "resumed while a recreation was under way when it was suspended", false},
	{stateSuspended, stateFailed, "a Job failed before it was suspended, and the failure policy fails the JobSet", false},
	{stateSuspended, stateCompleted, "the success policy is met", false},
}

// transitionOf returns the row of the table that moves a JobSet from one
// state to another, if there is one.
func transitionOf(from, to RestartState) (transition, bool) {
	for _, t := range transitions {
		if t.from == from && t.to == to {
			return t, true
		}
	}
	return transition{}, false
}
