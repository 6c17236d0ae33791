package decide

import (
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// Where a JobSet stands on its restart path is jobset.RestartStateOf, the
// one reading of it that the controller, inplacectl status and inplacectl
// migrate share. This file lists the moves decide makes between those
// states; the tests check every decision against it.

// transition is one move of a JobSet along its restart path.
type transition struct {
	from, to jobset.RestartState
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
	{jobset.StateStarting, jobset.StateRunning, "every expected Pod reports the same epoch: syncedEpoch moves to it and the barriers lift, in startup order (decideEpochs)", false},
	{jobset.StateStarting, jobset.StateRecreating, "a Job fails and the failure policy restarts the JobSet (applyFailure)", true},
	{jobset.StateStarting, jobset.StateFailed, "a Job fails and the failure policy fails the JobSet, or an agent restarted more than maxRestarts times before the first sync (crashLoop)", false},
	{jobset.StateStarting, jobset.StateSuspended, "spec.suspend: the Jobs are suspended, and the Pods not yet synced stop (suspendEpochs)", false},
	{jobset.StateStarting, jobset.StateCompleted, "the success policy is met", false},

	// A synced group.
	{jobset.StateRunning, jobset.StateRestarting, "a worker exits, a Pod fails or is deleted, an agent moves to a new epoch, or a Pod is missing: the synced epoch is deprecated and every Pod restarts in place (lostMember); also RestartJob, whose other Pods restart in place around the recreated Job (applyFailure); and a scale, not counted (InPlaceRestartForScale)", true},
	{jobset.StateRunning, jobset.StateRunning, "every Pod restarted and reported the next epoch before a restart began (their kubelets' restart rules, while a restart was held for a fatal exit): the group syncs, and the restart it made is counted (decideEpochs)", true},
	{jobset.StateRunning, jobset.StateRecreating, "a Job fails and the failure policy restarts the JobSet; or a member must restart while another's Pod has finished, which cannot restart in place (InPlaceRestartImpossible)", true},
	{jobset.StateRunning, jobset.StateFailed, "a Job fails and the failure policy fails the JobSet, or a restart is due with maxRestarts reached (ReachedMaxRestarts)", false},
	{jobset.StateRunning, jobset.StateSuspended, "spec.suspend (Kueue's admission and preemption): the Pods stop, the synced epoch ends without a restart (suspendEpochs)", false},
	{jobset.StateRunning, jobset.StateCompleted, "the success policy is met", false},

	// An in-place restart under way.
	{jobset.StateRestarting, jobset.StateRunning, "every Pod reports the next epoch: the group syncs and the restart ends (InPlaceRestartCompleted)", false},
	{jobset.StateRestarting, jobset.StateRecreating, "the restart does not converge within the in-place timeout (InPlaceRestartTimedOut, counted when it began), or a Job fails and the failure policy restarts the JobSet", false},
	{jobset.StateRestarting, jobset.StateFailed, "a Job fails and the failure policy fails the JobSet", false},
	{jobset.StateRestarting, jobset.StateSuspended, "spec.suspend: the restart ends without a recreation (InPlaceRestartSuspended)", false},
	{jobset.StateRestarting, jobset.StateCompleted, "the success policy is met", false},

	// A recreation under way.
	{jobset.StateRecreating, jobset.StateRunning, "the new Jobs are ready (JobsReady), or under InPlaceRestart their Pods sync an epoch", false},
	{jobset.StateRecreating, jobset.StateFailed, "a new Job fails and the failure policy fails the JobSet", false},
	{jobset.StateRecreating, jobset.StateSuspended, "spec.suspend", false},
	{jobset.StateRecreating, jobset.StateCompleted, "the success policy is met", false},

	// A suspended JobSet.
	{jobset.StateSuspended, jobset.StateStarting, "spec.suspend cleared (Kueue admits): the Jobs resume with the Pod template as it is now, and the new Pods sync a fresh epoch (resumedJob)", false},
	{jobset.StateSuspended, jobset.StateRunning, "spec.suspend cleared: without InPlaceRestart the Jobs resume; with it, when the new Pods have synced already", false},
	{jobset.StateSuspended, jobset.StateRecreating, "resumed while a recreation was under way when it was suspended", false},
	{jobset.StateSuspended, jobset.StateFailed, "a Job failed before it was suspended, and the failure policy fails the JobSet", false},
	{jobset.StateSuspended, jobset.StateCompleted, "the success policy is met", false},
}

// transitionOf returns the row of the table that moves a JobSet from one
// state to another, if there is one.
func transitionOf(from, to jobset.RestartState) (transition, bool) {
	for _, t := range transitions {
		if t.from == from && t.to == to {
			return t, true
		}
	}
	return transition{}, false
}
