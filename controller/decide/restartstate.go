package decide

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// Where a JobSet stands on its restart path is jobset.RestartStateOf, the
// one reading of it that the controller, inplacectl status and inplacectl
// migrate share. This file is the table of the moves decide makes between
// those states, each row with its guard and its effect, and apply, the one
// way decide moves a JobSet: no other code sets the RestartingJobSet,
// Suspended, Failed or Completed condition, or counts a restart.

// row names a row of the table.
type row int

const (
	firstSync row = iota
	inPlaceRestart
	inPlaceScale
	restartOneJobInPlace
	restartOneJob
	inPlaceRestartDone
	jobsReady
	inPlaceTimedOut
	inPlaceImpossible
	restartJobSet
	fail
	complete
	suspend
	suspendInPlaceRestart
	resume
)

// transition is one row: a move of a JobSet along its restart path.
type transition struct {
	name string
	// from are the states the move is made from; to, where it may land.
	// A row without to leaves the JobSet where it was: it counts a restart
	// and moves nothing.
	from, to []jobset.RestartState
	// on is the guard: what makes the move, where decide sees it.
	on string
	effect
}

// effect is what applying a row does. A reason or message left empty is
// the decision's (move), which knows the failure, the Pod or the epoch.
type effect struct {
	// finish ends the JobSet (Failed or Completed) with the condition of
	// that name, and closes StartupPolicyInProgress and ImagePullFailure.
	finish                      string
	finishReason, finishMessage string
	// suspended sets the Suspended condition (True: suspended, False:
	// resumed), with its Event, and a suspension resets the startup order.
	suspended metav1.ConditionStatus
	// restarting sets the RestartingJobSet condition: True opens a restart,
	// False closes the one the JobSet has (none: nothing to close).
	restarting      metav1.ConditionStatus
	reason, message string
	// event is the type of the Event the row records ("": none): the
	// decision's own (move.event), else one that says what the finish or
	// the restart condition says.
	event string
	// restarts and inPlaceRestarts are the counters the row adds one to;
	// jobRestart, the failed Job's individual restart counter instead of
	// restarts. counted: the restart counts towards maxRestarts, unless
	// the decision says it may not (move.uncounted).
	restarts, inPlaceRestarts, jobRestart, counted bool
	// deprecate: under in-place restarts, deprecatedEpoch catches up with
	// syncedEpoch: none of the group's Pods is expected any more.
	deprecate bool
	// epochs writes the epochs decided (move.epochs).
	epochs bool
	// resetStartup makes the startup order run again.
	resetStartup bool
}

// movable are the states that are not final.
var movable = states(jobset.StateStarting, jobset.StateRunning, jobset.StateRestarting, jobset.StateRecreating, jobset.StateSuspended)

func states(s ...jobset.RestartState) []jobset.RestartState { return s }

// transitions are every move decide makes, read top to bottom. Failed and
// Completed are final. The carry-over of the status upstream JobSet left
// (adoptUpstream) comes before any move and is none: the restarts it
// counts were made under upstream.
var transitions = [...]transition{
	// The group syncs.
	firstSync: {name: "first sync", from: states(jobset.StateStarting), to: states(jobset.StateRunning),
		on:     "every expected Pod reports the same epoch: the first start, or the first after a resume (decideEpochs)",
		effect: effect{epochs: true}},

	// A synced group loses a member.
	inPlaceRestart: {name: "in-place restart", from: states(jobset.StateRunning), to: states(jobset.StateRestarting),
		on: "a worker exits, a Pod fails or is deleted, an agent moves to a new epoch, a Pod is missing (lostMember), or every Pod restarted before a restart was decided; below maxRestarts, no member finished, no fatal exit held for",
		effect: effect{restarting: metav1.ConditionTrue, reason: ReasonInPlaceRestart, event: corev1.EventTypeWarning,
			restarts: true, inPlaceRestarts: true, counted: true}},
	inPlaceScale: {name: "in-place scale", from: states(jobset.StateRunning), to: states(jobset.StateRestarting),
		on:     "the synced group is not the size its templates ask for (scaling.go)",
		effect: effect{restarting: metav1.ConditionTrue, reason: ReasonInPlaceScale, event: corev1.EventTypeNormal}},
	restartOneJobInPlace: {name: "RestartJob in place", from: states(jobset.StateRunning), to: states(jobset.StateRestarting),
		on: "the failure policy restarts one Job (RestartJob) of a synced group: the other Pods restart in place around it, in this one restart",
		effect: effect{restarting: metav1.ConditionTrue, reason: ReasonInPlaceRestart, event: corev1.EventTypeWarning,
			jobRestart: true, counted: true, deprecate: true}},
	restartOneJob: {name: "RestartJob", from: movable,
		on:     "the failure policy restarts one Job (RestartJob) of a group that is not synced, or of a JobSet that does not restart in place",
		effect: effect{event: corev1.EventTypeWarning, jobRestart: true, counted: true}},

	// A restart ends.
	inPlaceRestartDone: {name: "in-place restart done", from: states(jobset.StateRestarting, jobset.StateRecreating), to: states(jobset.StateRunning),
		on:     "under InPlaceRestart, every Pod reports the next epoch and the group syncs",
		effect: effect{restarting: metav1.ConditionFalse, reason: ReasonInPlaceRestartDone, event: corev1.EventTypeNormal}},
	jobsReady: {name: "Jobs ready", from: states(jobset.StateRecreating, jobset.StateRestarting), to: states(jobset.StateRunning),
		on:     "without in-place restarts, every Job is ready or succeeded, the JobSet not suspended",
		effect: effect{restarting: metav1.ConditionFalse, reason: ReasonRestartJobsReady, message: MessageRestartJobsReady}},

	// An in-place restart gives way to a recreation.
	inPlaceTimedOut: {name: "in-place timeout", from: states(jobset.StateRestarting), to: states(jobset.StateRecreating),
		on: "the in-place restart did not converge within the in-place timeout (fallBackIfStuck); counted when it began",
		effect: effect{restarting: metav1.ConditionTrue, reason: ReasonInPlaceRestartTimedOut, event: corev1.EventTypeWarning,
			restarts: true, deprecate: true}},
	inPlaceImpossible: {name: "in-place restart impossible", from: states(jobset.StateRunning), to: states(jobset.StateRecreating),
		on: "an in-place restart is due while a member's Pod has finished, which cannot restart in place (finishedMember)",
		effect: effect{restarting: metav1.ConditionTrue, reason: ReasonInPlaceRestartImpossible, event: corev1.EventTypeWarning,
			restarts: true, counted: true, deprecate: true}},

	// The failure policy decides.
	restartJobSet: {name: "RestartJobSet", from: movable, to: states(jobset.StateRecreating, jobset.StateSuspended),
		on: "a Job fails and the failure policy restarts the JobSet, below maxRestarts: every Job is recreated; a suspended JobSet stays suspended, its recreation under way",
		effect: effect{restarting: metav1.ConditionTrue, event: corev1.EventTypeWarning,
			restarts: true, counted: true, deprecate: true, resetStartup: true}},
	fail: {name: "fail", from: movable, to: states(jobset.StateFailed),
		on: "the failure policy fails the JobSet; a restart is due with maxRestarts reached; an agent restarted more than maxRestarts times before the first sync (crashLoop)",
		effect: effect{finish: jobset.TerminalStateFailed, event: corev1.EventTypeWarning,
			restarting: metav1.ConditionFalse, reason: ReasonRestartJobSetFailed, message: MessageRestartJobSetFailed}},
	complete: {name: "complete", from: movable, to: states(jobset.StateCompleted),
		on: "the success policy is met",
		effect: effect{finish: jobset.TerminalStateCompleted, finishReason: ReasonAllJobsCompleted, finishMessage: MessageAllJobsCompleted, event: corev1.EventTypeNormal,
			restarting: metav1.ConditionFalse, reason: ReasonRestartJobSetCompleted, message: MessageAllJobsCompleted}},

	// Suspend and resume (Kueue's admission and preemption): never a
	// failure, never a restart.
	suspend: {name: "suspend", from: states(jobset.StateStarting, jobset.StateRunning, jobset.StateRestarting, jobset.StateRecreating), to: states(jobset.StateSuspended),
		on:     "spec.suspend: the Jobs are suspended; a recreation under way goes on, and ends once the resumed Jobs run",
		effect: effect{suspended: metav1.ConditionTrue, resetStartup: true}},
	suspendInPlaceRestart: {name: "suspend an in-place restart", from: states(jobset.StateRestarting), to: states(jobset.StateSuspended),
		on: "spec.suspend during an in-place restart: it ends without a recreation, and no timeout runs",
		effect: effect{suspended: metav1.ConditionTrue, resetStartup: true,
			restarting: metav1.ConditionFalse, reason: ReasonInPlaceRestartSuspended, event: corev1.EventTypeNormal}},
	resume: {name: "resume", from: states(jobset.StateSuspended), to: states(jobset.StateStarting, jobset.StateRunning, jobset.StateRecreating, jobset.StateRestarting),
		on:     "spec.suspend cleared: Starting under InPlaceRestart (the new Pods sync a fresh epoch), Recreating if a recreation was under way, Running otherwise",
		effect: effect{suspended: metav1.ConditionFalse}},
}

// move is what a decision adds to the row it applies.
type move struct {
	// reason and message of the condition the row sets, where the row
	// leaves them to the decision.
	reason, message string
	// event, if set, is the Event recorded instead of one that repeats the
	// condition (a failure policy's action).
	event *Event
	// uncounted: the restart does not count towards maxRestarts.
	uncounted bool
	// job is the failed Job of a row that restarts one.
	job *batchv1.Job
	// epochs are the epochs of a row that writes them.
	epochs epochDecision
}

// apply moves the JobSet by row r: the one place that does.
func (p *Plan) apply(js *jobset.JobSet, r row, m move, now metav1.Time) {
	e, s := transitions[r].effect, &p.Status
	or := func(a, b string) string {
		if a != "" {
			return a
		}
		return b
	}
	if e.epochs {
		s.DeprecatedEpoch, s.SyncedEpoch, s.SyncedPods = m.epochs.deprecated, m.epochs.synced, m.epochs.syncedPods
	}
	counted := e.counted && !m.uncounted
	switch {
	case e.jobRestart:
		// The Job's index was checked (applyFailure).
		_ = restartJob(js, s, m.job, counted)
	case counted:
		s.RestartsCountTowardsMax++
	}
	if e.restarts {
		s.Restarts++
	}
	if e.inPlaceRestarts {
		s.InPlaceRestarts++
	}
	if e.deprecate && jobset.InPlaceActive(js) {
		s.DeprecatedEpoch = s.SyncedEpoch
	}

	event := m.event
	if e.finish != "" {
		reason, message := or(e.finishReason, m.reason), or(e.finishMessage, m.message)
		s.TerminalState = e.finish
		setCondition(s, finishCondition[e.finish], metav1.ConditionTrue, reason, message, now)
		if event == nil {
			event = &Event{e.event, reason, message}
		}
	}
	switch e.suspended {
	case metav1.ConditionTrue:
		setCondition(s, jobset.JobSetSuspended, metav1.ConditionTrue, ReasonSuspended, MessageSuspended, now)
		p.Events = append(p.Events, Event{corev1.EventTypeNormal, ReasonSuspended, MessageSuspended})
	case metav1.ConditionFalse:
		setCondition(s, jobset.JobSetSuspended, metav1.ConditionFalse, ReasonResumed, MessageResumed, now)
		p.Events = append(p.Events, Event{corev1.EventTypeNormal, ReasonResumed, MessageResumed})
	}
	if e.restarting != "" {
		reason, message := or(e.reason, m.reason), or(e.message, m.message)
		// Closed only where the JobSet has one: a finish closes the
		// condition itself, not a restart under way (a suspended JobSet's
		// state is Suspended even while a recreation's condition is open,
		// which the finish must close all the same), and takes the
		// finish's reason and message, as upstream's does, whatever it
		// said before.
		if e.restarting == metav1.ConditionTrue || meta.FindStatusCondition(s.Conditions, string(jobset.JobSetRestarting)) != nil {
			setCondition(s, jobset.JobSetRestarting, e.restarting, reason, message, now)
		}
		if event == nil {
			event = &Event{e.event, reason, message}
		}
	}
	if e.finish != "" {
		endTransientConditions(s, now)
	}
	if e.resetStartup {
		resetStartup(s, now)
	}
	if e.event != "" && event != nil {
		p.Events = append(p.Events, *event)
	}
	p.moves = append(p.moves, r)
}

var finishCondition = map[string]jobset.JobSetConditionType{
	jobset.TerminalStateFailed:    jobset.JobSetFailed,
	jobset.TerminalStateCompleted: jobset.JobSetCompleted,
}
