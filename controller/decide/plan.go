package decide

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/state"
)

// Observed is what the reconciler read about a JobSet's children.
type Observed struct {
	// Family is the JobSet's Jobs and Pods, counted under its view
	// (family.setView); decide reads them and does not change them.
	Family *state.Family
	// Jobs and Pods are whole lists of the JobSet's children, read when
	// fam is nil (the tests build the world they decide on this way).
	Jobs []batchv1.Job
	Pods []corev1.Pod
	// ServiceExists reports whether the headless Service exists.
	ServiceExists bool
	// Claims holds the names of the JobSet's volume claims that exist.
	Claims map[string]bool
	// Broadcast is the data of the broadcast ConfigMap of an InPlaceRestart
	// JobSet; nil if it does not exist.
	Broadcast map[string]string
	// ReportEndpoint is where this JobSet's agents report directly, put
	// in its broadcast; zero: they report on their Pods.
	ReportEndpoint protocol.ReportEndpoint
	// ReportsSettling says that this JobSet's agents may be turning to
	// this leader's way of reporting: it takes direct reports, or the
	// JobSet's broadcast named another leader's session. ReportsSince is
	// when the broadcast, as the cache shows it, first named this
	// leader's session, or none where this leader takes no direct reports
	// (zero: not yet). While settling, until ReportGrace from then, a Pod
	// of a synced group that reported nothing is taken as still at the
	// synced epoch (unreportedAsSynced): a change of leader restarts
	// nothing, whichever way either takes reports.
	ReportsSettling bool
	ReportsSince    time.Time
	// Creating names the Jobs created by an earlier reconcile that jobs,
	// read from the cache, does not show yet: they are not created again.
	Creating map[string]bool
	// Deleting holds the UIDs of the Jobs deleted by an earlier reconcile
	// that jobs still shows as not being deleted: they are not deleted
	// again.
	Deleting map[types.UID]bool
	// RestartHeldSince is Plan.RestartHeldSince of the JobSet's previous
	// reconcile: when an in-place restart was first held back for
	// Timeouts.FatalExitSettle. Zero if none is.
	RestartHeldSince time.Time
	// AgentGrantsMissing says that the agents' Role and Pod RoleBinding of
	// the JobSet's namespace, as the cache holds them, do not name its
	// broadcast and every service account its Pods run as; read for an
	// InPlaceRestart JobSet whose in-place restarts are on. Its new Jobs
	// wait for them (agent_grants.go).
	AgentGrantsMissing bool
	// ControllerStarted is when this controller started: a JobSet created
	// while none ran waits for its agents' grants from then, not from its
	// creation (AgentGrantWaitLeft).
	ControllerStarted time.Time
	// Priorities resolves the priority the API server gives the Pods of
	// each of the JobSet's replicated jobs (PriorityClassNames).
	Priorities Priorities
}

// Event is an Event to record on the JobSet once the status is written.
type Event struct {
	Type, Reason, Message string
}

// Plan is everything one reconcile does, decided by decide without I/O.
type Plan struct {
	Status      jobset.JobSetStatus
	CreateJobs  []*batchv1.Job
	DeleteJobs  []*batchv1.Job
	SuspendJobs []*batchv1.Job
	// ResumeJobs are the Jobs to unsuspend, each with what it must become:
	// the Pod template's scheduling directives changed while it was
	// suspended go on with the resume, in one write.
	ResumeJobs []JobUpdate
	// ScaleJobs are Jobs whose parallelism and completions must become
	// their replicated job's (elastic replicated jobs, scaling.go).
	ScaleJobs []JobScale
	Service   *corev1.Service
	// CreatePVCs are the claims of spec.volumeClaimPolicies that do not
	// exist yet; they are created before any Job, whose Pods mount them.
	CreatePVCs []*corev1.PersistentVolumeClaim
	// DeletePods are Pods that must stop and cannot by themselves: a fatal
	// exit while other containers run (stuckFatal), workers that escaped a
	// restart (stopEscapedWorkers). Each Event is recorded once the Pod's
	// deletion succeeded.
	DeletePods []PodDeletion
	// RestartHeldSince is set while an in-place restart is held back for
	// Timeouts.FatalExitSettle: when it first was. The reconciler keeps it
	// (state.Holds) and hands it to the JobSet's next reconcile
	// (Observed.RestartHeldSince).
	RestartHeldSince time.Time
	// AwaitingAgentGrants is set while the Jobs to create wait for the
	// agents' grants (awaitAgentGrants): at most how much longer they may.
	// CreateJobs is empty then.
	AwaitingAgentGrants time.Duration
	// CreateWithoutAgentGrants says that CreateJobs are created though the
	// agents' grants do not name the JobSet, AgentGrantWait over: the
	// reconciler says so with a Warning (ReasonAgentGrantsMissing) before
	// it carries out anything of the plan.
	CreateWithoutAgentGrants bool
	// Broadcast, if set, is the data the broadcast ConfigMap must hold.
	Broadcast    map[string]string
	DeleteJobSet bool
	// RequeueAfter is when the JobSet must be reconciled again though
	// nothing changes (a deadline, a grace, a wait); zero: not. Every
	// decision that needs one asks for it through requeueWithin.
	RequeueAfter time.Duration
	// Events are the decisions' Events, recorded once the status that
	// carries them is written.
	Events []Event
	// Warnings are Events about what was observed (bad input), recorded on
	// every reconcile that observes it.
	Warnings []Event

	// moves are the rows of the table of transitions the decisions
	// applied, in order.
	moves []row
}

// Decide computes the plan for a defaulted JobSet from what was observed.
// The order of the steps matters:
//
//	status upstream JobSet wrote? ── yes ─▶ its epochs and in-place restarts carried over (adoptUpstream), then on
//	finished? ── yes ─▶ delete active Jobs, honour TTL
//	   │ no
//	delete Jobs of earlier attempts
//	failed Jobs? ── yes ─▶ failure policy (restart or fail), nothing else
//	   │ no
//	success policy met? ── yes ─▶ Completed
//	   │ no
//	headless Service, volume claims, suspend/resume, scale, create missing
//	Jobs in startup order
//	   │
//	Jobs to create of a new InPlaceRestart JobSet whose agents' grants are
//	missing? ── yes ─▶ held back until the grants or AgentGrantWait (awaitAgentGrants)
func Decide(js *jobset.JobSet, obs Observed, now metav1.Time, t Timeouts) Plan {
	js, adopted := adoptUpstream(js)
	p := decideSteps(js, obs, now, t)
	p.awaitAgentGrants(js, obs, now.Time)
	p.Events = append(adopted, p.Events...)
	inStepWithEpochs(&p.Status)
	return p
}

// Timeouts are the controller's settings that bound its decisions in time.
type Timeouts struct {
	// InPlaceRestart bounds an in-place restart; past it the JobSet falls
	// back to recreating its Jobs.
	InPlaceRestart time.Duration
	// FatalExitSettle is how long an in-place restart waits for a fatal
	// exit (DefaultFatalExitSettle); 0: not at all.
	FatalExitSettle time.Duration
}

func decideSteps(js *jobset.JobSet, obs Observed, now metav1.Time, t Timeouts) Plan {
	p := Plan{Status: *js.Status.DeepCopy()}
	fam := obs.Family
	if fam == nil {
		fam = state.FamilyOf(js, obs.Jobs, obs.Pods)
	}
	c := state.ClassifyJobs(fam, obs.Deleting, obs.Creating)

	if jobset.Finished(&p.Status) {
		p.DeleteJobs = append(p.DeleteJobs, c.Active()...)
		p.DeleteJobs = append(p.DeleteJobs, c.PreviousJobs()...)
		expired, after := ttlDecision(js, now.Time)
		p.DeleteJobSet = expired
		p.RequeueWithin(after)
		return p
	}

	p.DeleteJobs = c.PreviousJobs()
	// From the plan's deep copy, not js.Status: the counters are the
	// plan's to change.
	p.Status.ReplicatedJobsStatus = replicatedJobsStatus(js, p.Status.ReplicatedJobsStatus, c)

	if failed := c.Failed(); len(failed) > 0 {
		p.applyFailure(js, decideFailure(js, failed), now)
		return p
	}

	if successPolicyMet(js, p.Status.ReplicatedJobsStatus) {
		p.apply(js, complete, move{}, now)
		return p
	}

	if DNSHostnamesEnabled(js) && !obs.ServiceExists {
		p.Service = buildService(js)
	}
	// Suspended or not: the claims exist before the Jobs, which are created
	// suspended while the JobSet is.
	p.CreatePVCs = missingClaims(js, obs.Claims)

	suspended := ptr.Deref(js.Spec.Suspend, false)
	allowed := startupGate(js, p.Status.ReplicatedJobsStatus)
	if jobset.InPlaceActive(js) {
		// Every Pod must report an epoch before any barrier lifts, so every
		// Job is created at once; the barriers then lift in startup order.
		for i := range allowed {
			allowed[i] = true
		}
	}
	p.suspendOrResume(js, c, suspended, allowed, obs.Priorities, now)
	p.ScaleJobs = jobsToScale(js, c)
	if !blockedByPreviousAttempt(js, c) {
		p.CreateJobs = missingJobs(js, c, suspended, allowed, obs.Priorities)
	}

	if !suspended {
		updateStartupConditions(js, &p.Status, now)
	}
	// The Pods of the current attempt as the epoch protocol sees them, read
	// once for it and for the images they wait for; only an InPlaceRestart
	// JobSet's Pods have agents.
	var pods []state.PodGroup
	if jobset.InPlaceActive(js) {
		pods = fam.PodGroups(js, strconv.Itoa(int(jobset.RecreateAttempt(&js.Status))))
	}
	switch {
	case jobset.InPlaceActive(js) && suspended:
		p.suspendEpochs(obs.Broadcast, obs.ReportEndpoint)
	case jobset.InPlace(js) && c.Total(func(r *state.JobCounts) int32 { return r.Failing }) == 0:
		// A Job the Job controller is failing (FailureTarget) deletes its
		// Pods before it is marked Failed: the failure policy decides, not
		// an in-place restart. From where the JobSet stood when it was
		// read: the plan's status may say it was resumed already.
		p.reconcileEpochs(js, jobset.RestartStateOf(js, &js.Status), pods, obs, now, t)
	}
	if jobset.InPlaceActive(js) && !jobset.Finished(&p.Status) {
		// After the epochs, which may have failed the JobSet: a finished
		// JobSet's Pods stop, and its condition was closed with the rest.
		p.reportImagePulls(pods, now)
	}
	// Recreating (or, on a JobSet whose in-place restarts were disabled
	// during one, Restarting) ends once every Job runs; not while the
	// JobSet is suspended, whose Jobs' readiness is on its way down.
	if !jobset.InPlaceActive(js) && jobset.RestartStateOf(js, &p.Status).RestartUnderWay() && allStarted(js, p.Status.ReplicatedJobsStatus) {
		p.apply(js, jobsReady, move{}, now)
	}
	return p
}

// reconcileEpochs runs the in-place restart protocol on the Pods of the
// current attempt (pods, nil unless InPlaceActive): the epochs they
// report, the restart they may begin, counted against maxRestarts, or the
// one they end, and the broadcast the agents watch. from is the restart
// state of the status read. A step that fails the JobSet or recreates its
// Jobs ends it: the Pods of the epochs are then gone or going.
func (p *Plan) reconcileEpochs(js *jobset.JobSet, from jobset.RestartState, pods []state.PodGroup, obs Observed, now metav1.Time, t Timeouts) {
	if !jobset.InPlaceActive(js) {
		p.broadcastDisabled(js, obs.Broadcast)
		return
	}
	p.warnOfUnusableInput(js, pods)
	p.deleteStuckFatal(pods)
	if p.failCrashLoop(js, pods, now) {
		return
	}
	pods = p.awaitReports(js, from, pods, obs, now)
	d := decideEpochs(js, pods)
	p.holdForFatalExit(js, &d, pods, obs, now, t.FatalExitSettle)
	p.writeEpochs(js, d, now)
	if p.beginRestart(js, d, pods, now) {
		return
	}
	p.endRestart(js, d, now)
	if p.fallBackIfStuck(js, now, t.InPlaceRestart) {
		return
	}
	if jobset.RestartStateOf(js, &p.Status).InPlaceRestarting() {
		p.stopEscapedWorkers(pods, d.deprecated)
	}
	p.broadcast(protocol.Broadcast{DeprecatedEpoch: d.deprecated, SyncedEpoch: d.synced, OpenReplicatedJobs: d.openReplicatedJobs, Reports: obs.ReportEndpoint}, obs.Broadcast)
}

// broadcastDisabled tells the agents of a JobSet whose in-place restarts
// are off to lift their barriers at once and never report: the epochs
// stay where they are, no restart is decided or counted and none times
// out; a Pod that fails is replaced by its Job, as without InPlaceRestart.
func (p *Plan) broadcastDisabled(js *jobset.JobSet, have map[string]string) {
	p.broadcast(protocol.Broadcast{DeprecatedEpoch: js.Status.DeprecatedEpoch, SyncedEpoch: js.Status.SyncedEpoch, Disabled: true}, have)
}

// broadcast sets the broadcast's data to b, unless it holds it already.
func (p *Plan) broadcast(b protocol.Broadcast, have map[string]string) {
	if want := protocol.EncodeBroadcast(b); !maps.Equal(want, have) {
		p.Broadcast = want
	}
}

// warnOfUnusableInput says what the protocol cannot use: Jobs whose
// completions are not their parallelism, and epochs that are no epochs.
func (p *Plan) warnOfUnusableInput(js *jobset.JobSet, pods []state.PodGroup) {
	for _, uneven := range unevenJobs(js) {
		p.Warnings = append(p.Warnings, Event{corev1.EventTypeWarning, ReasonInvalidInPlaceRestartJobs, fmt.Sprintf(
			"InPlaceRestart needs completions == parallelism in every Job: %s; the group is expected to have %d Pods", uneven, expectedPods(js))})
	}
	for _, g := range pods {
		if g.InvalidEpoch == "" {
			continue
		}
		for _, name := range g.SortedNames() {
			p.Warnings = append(p.Warnings, Event{corev1.EventTypeWarning, ReasonInvalidEpoch, fmt.Sprintf(
				"Pod %s reports epoch %q on annotation %s, %s: it counts as not reported, and the group cannot sync until its agent writes a valid one",
				name, g.InvalidEpoch, g.EpochKey, g.InvalidWhy)})
		}
	}
}

// deleteStuckFatal deletes the Pods whose fatal exit cannot fail them by
// itself: their other containers still run.
func (p *Plan) deleteStuckFatal(pods []state.PodGroup) {
	for _, g := range pods {
		for _, pod := range g.Stuck {
			p.DeletePods = append(p.DeletePods, PodDeletion{pod, Event{corev1.EventTypeWarning, ReasonFatalExitPodDeleted, fmt.Sprintf(
				"container %s of Pod %s exited with a code its Job's podFailurePolicy makes FailJob while its other containers still run: deleted the Pod so that it fails, and its Job with it",
				g.WorkerExited, pod.Name)}})
		}
	}
}

// failCrashLoop fails the JobSet whose agent crash-loops before the group
// first synced (crashLoop), unless a fatal exit is about to fail it by
// its failure policy. It reports whether it did.
func (p *Plan) failCrashLoop(js *jobset.JobSet, pods []state.PodGroup, now metav1.Time) bool {
	msg := crashLoop(js, &p.Status, pods)
	if msg == "" || slices.ContainsFunc(pods, func(p state.PodGroup) bool { return p.Fatal }) {
		return false
	}
	p.apply(js, fail, move{reason: ReasonReachedMaxRestarts, message: msg}, now)
	return true
}

// awaitReports takes, while this leader's way of taking reports settles
// (Observed.ReportsSettling), the Pods of a synced group that have not
// reported yet as still at the synced epoch, until ReportGrace is over.
func (p *Plan) awaitReports(js *jobset.JobSet, from jobset.RestartState, pods []state.PodGroup, obs Observed, now metav1.Time) []state.PodGroup {
	if !obs.ReportsSettling || from != jobset.StateRunning {
		return pods
	}
	left := ReportGrace
	if !obs.ReportsSince.IsZero() {
		left = obs.ReportsSince.Add(ReportGrace).Sub(now.Time)
	}
	var unheard bool
	if left > 0 {
		pods, unheard = unreportedAsSynced(pods, js.Status.SyncedEpoch)
	}
	if unheard {
		// Judged again once the grace is over: an agent that never
		// says its state again is then a member missing.
		p.RequeueWithin(left)
	}
	return pods
}

// holdForFatalExit holds back a restart d began in a JobSet whose Jobs
// can fail by their podFailurePolicy, for settle (DefaultFatalExitSettle):
// a fatal exit reported meanwhile makes the failure policy decide instead.
func (p *Plan) holdForFatalExit(js *jobset.JobSet, d *epochDecision, pods []state.PodGroup, obs Observed, now metav1.Time, settle time.Duration) {
	if !d.restartBegan || d.madeByEveryPod || settle <= 0 || !canFailJobs(js) {
		return
	}
	if !obs.ReportEndpoint.IsZero() && protocol.ProcessScope(js.Annotations) && allReported(pods) {
		// Every exit, fatal or not, reaches the controller from the
		// agents, the fatal one first: no kubelet relist to wait for.
		// Only where every agent reports directly: one injected by
		// an earlier manager, or writing its Pod, may run a
		// supervisor that does not say a fatal exit.
		settle = min(settle, DirectFatalExitSettle)
	}
	p.holdRestart(js, d, obs.RestartHeldSince, now.Time, settle)
}

// writeEpochs writes the epochs decided. The first sync of a group that
// was starting is its move to Running.
func (p *Plan) writeEpochs(js *jobset.JobSet, d epochDecision, now metav1.Time) {
	if d.syncs && jobset.RestartStateOf(js, &p.Status) == jobset.StateStarting {
		p.apply(js, firstSync, move{epochs: d}, now)
		return
	}
	p.Status.DeprecatedEpoch, p.Status.SyncedEpoch, p.Status.SyncedPods = d.deprecated, d.synced, d.syncedPods
}

// beginRestart applies the restart d began, if any: a scale, or a restart
// in place; or, past maxRestarts, the JobSet's failure; or, with a member
// whose Pod finished, a recreation. It reports whether the JobSet failed
// or is recreated.
func (p *Plan) beginRestart(js *jobset.JobSet, d epochDecision, pods []state.PodGroup, now metav1.Time) bool {
	switch {
	case d.scaleBegan:
		// Not a restart for the counters: nothing failed.
		p.apply(js, inPlaceScale, move{message: fmt.Sprintf("in-place restart for a scale: %s; epoch %d deprecated, the group syncs again at its new size (not counted towards maxRestarts)",
			d.why, d.deprecated)}, now)
		return false
	case !d.restartBegan:
		return false
	}
	if maxRestarts := js.Spec.FailurePolicy.MaxRestarts; !d.uncounted && countedRestarts(&p.Status) >= maxRestarts {
		p.apply(js, fail, move{reason: ReasonReachedMaxRestarts,
			message: fmt.Sprintf("%s (in place, after %d restarts: %s)", MessageReachedMaxRestarts, maxRestarts, d.why)}, now)
		return true
	}
	if who := finishedMember(pods); who != "" {
		// A member whose Pod succeeded has no agent left to restart:
		// waiting for it would only end at the timeout. The Jobs are
		// recreated at once instead, one restart counted.
		p.apply(js, inPlaceImpossible, move{uncounted: d.uncounted, message: fmt.Sprintf(
			"%s, and Pod %s has finished, which cannot restart in place: recreating every Job (restart %d)", d.why, who, p.Status.Restarts+1)}, now)
		return true
	}
	msg := fmt.Sprintf("in-place restart %d: %s; epoch %d deprecated", p.Status.InPlaceRestarts+1, d.why, d.deprecated)
	if d.uncounted {
		msg += " (not counted towards maxRestarts)"
	}
	p.apply(js, inPlaceRestart, move{uncounted: d.uncounted, message: msg}, now)
	return false
}

// endRestart closes the restart under way, in place or a recreation,
// once the group synced at a newer epoch than the one deprecated.
func (p *Plan) endRestart(js *jobset.JobSet, d epochDecision, now metav1.Time) {
	if jobset.RestartStateOf(js, &p.Status).RestartUnderWay() && d.synced > d.deprecated {
		p.apply(js, inPlaceRestartDone, move{message: fmt.Sprintf("every Pod restarted in place and synced at epoch %d (%d Pods)", d.synced, d.syncedPods)}, now)
	}
}

// DefaultFatalExitSettle is how long an in-place restart waits, in a
// JobSet whose Jobs have podFailurePolicy rules that fail them, for a fatal
// exit its failure may be the echo of (controller.fatalExitSettle). A
// training program's ranks fail together: one exits with a code that must
// fail the JobSet, its peers exit 1 the moment their collective breaks.
// Each kubelet reports its Pod's exit on its next relist (every second),
// so the peers' exits may be reported first, and a restart begun on them
// would restart the fatal Pod too. The fatal exit happened before its
// echoes and its kubelet normally reports it within a relist period of
// them: two seconds leave the status update a second. Best effort: a
// kubelet slower than that loses the race. JobSets without such rules
// restart at once.
const DefaultFatalExitSettle = 2 * time.Second

// ReportGrace is how long a leader that has just begun taking direct
// reports waits for the agents of a synced group to say their state again
// before it takes a Pod that said nothing as missing: the agents see its
// session in the broadcast and report within about a second, thousands of
// them within a few.
const ReportGrace = 10 * time.Second

// DirectFatalExitSettle is the hold of DefaultFatalExitSettle where the
// agents report to the controller directly in process scope: each
// worker's exit, with its code, reaches the controller from its agent
// within milliseconds, the supervisor of a worker whose code fails its Job
// telling its agent before its container ends, so before the peers it
// brings down exit. What is left to wait for is the spread of a few HTTP
// requests.
const DirectFatalExitSettle = 250 * time.Millisecond

// allReported reports whether every Pod's agent reported to this leader
// directly.
func allReported(pods []state.PodGroup) bool {
	return !slices.ContainsFunc(pods, func(p state.PodGroup) bool { return !p.Reported && !p.Gone })
}

// canFailJobs reports whether a Pod's failure can fail its Job by the
// Job's podFailurePolicy (a FailJob or FailIndex rule).
func canFailJobs(js *jobset.JobSet) bool {
	for _, rj := range js.Spec.ReplicatedJobs {
		if pfp := rj.Template.Spec.PodFailurePolicy; pfp != nil {
			for _, r := range pfp.Rules {
				if r.Action == batchv1.PodFailurePolicyActionFailJob || r.Action == batchv1.PodFailurePolicyActionFailIndex {
					return true
				}
			}
		}
	}
	return false
}

// holdRestart holds back the restart d began until settle has passed since
// it was first held (since; zero: now), and has the JobSet reconciled again
// then. A fatal exit reported meanwhile makes the failure policy decide
// instead (decideEpochs), and no restart begins. A restart that every Pod
// already made is not held (its caller): no Pod failed fatally, or it
// would not have restarted.
func (p *Plan) holdRestart(js *jobset.JobSet, d *epochDecision, since, now time.Time, settle time.Duration) {
	if since.IsZero() {
		since = now
	}
	wait := since.Add(settle).Sub(now)
	if wait <= 0 {
		return
	}
	p.RestartHeldSince = since
	p.RequeueWithin(wait)
	d.deprecated, d.restartBegan, d.why, d.uncounted = js.Status.DeprecatedEpoch, false, "", false
}

// suspendEpochs ends the group of a suspended JobSet, which is no failure:
// a suspension (Kueue's admission and preemption lever) stops every Pod
// with its Job, and nothing of the group survives to restart. The synced
// epoch is over without a restart counted: deprecatedEpoch catches up with
// it, so that the Pods started on resume report a fresh epoch and wait
// behind the barrier until all of them have, as on a first start. An
// in-place restart under way ended with the suspension (suspendJobSet).
func (p *Plan) suspendEpochs(broadcast map[string]string, endpoint protocol.ReportEndpoint) {
	p.Status.DeprecatedEpoch = max(p.Status.DeprecatedEpoch, p.Status.SyncedEpoch)
	p.broadcast(protocol.Broadcast{DeprecatedEpoch: p.Status.DeprecatedEpoch, SyncedEpoch: p.Status.SyncedEpoch, Reports: endpoint}, broadcast)
}

// RequeueWithin has the JobSet reconciled again within d at the latest:
// the sooner of d and what the plan asked for already. Zero or less asks
// for nothing.
func (p *Plan) RequeueWithin(d time.Duration) {
	if d > 0 && (p.RequeueAfter == 0 || d < p.RequeueAfter) {
		p.RequeueAfter = d
	}
}

// PodDeletion is a Pod to delete and the Event that says why.
type PodDeletion struct {
	Pod *corev1.Pod
	Why Event
}

// stopEscapedWorkers deletes, during an in-place restart, the Pods of a
// deprecated epoch whose agent crash-loops while their workers run: an
// agent in CrashLoopBackOff cannot see the deprecation, so its workers
// would go on at the old epoch, beside a group that moved on, until the
// in-place timeout. Deleted, the Pod stops its workers and its Job
// replaces it with a Pod that joins the new epoch.
func (p *Plan) stopEscapedWorkers(pods []state.PodGroup, deprecated int32) {
	for _, g := range pods {
		if !g.AgentCrashLooping || g.Gone || g.Epoch == 0 || g.Epoch > deprecated {
			continue
		}
		for _, pod := range g.Pods {
			p.DeletePods = append(p.DeletePods, PodDeletion{pod, Event{corev1.EventTypeWarning, ReasonAgentCrashLoopPodDeleted, fmt.Sprintf(
				"the agent of Pod %s was in CrashLoopBackOff while its workers ran at epoch %d, which is deprecated: deleted the Pod so that its workers stop; its Job replaces it",
				pod.Name, g.Epoch)}})
		}
	}
}

// finishedMember names a Pod of the group that succeeded, or "".
func finishedMember(pods []state.PodGroup) string {
	for _, g := range pods {
		if g.Finished {
			return g.First()
		}
	}
	return ""
}

// crashLoop bounds the one wait nothing else bounds: a group that has not
// synced yet (the first start, or the first after a recreation), with no
// in-place restart under way (whose timeout bounds it), waits for every
// agent to report, and an agent that crash-loops (it cannot reach the API
// server, its patch is refused) never does. Once its agent restarted more
// than maxRestarts times, the JobSet fails with ReachedMaxRestarts. After
// the group synced, an agent that crashes alone resumes its epoch and
// costs nothing. It returns the reason, or "".
func crashLoop(js *jobset.JobSet, status *jobset.JobSetStatus, pods []state.PodGroup) string {
	if jobset.RestartStateOf(js, status) != jobset.StateStarting {
		return ""
	}
	maxRestarts := js.Spec.FailurePolicy.MaxRestarts
	for _, pod := range pods {
		if pod.Gone || pod.Finished || (pod.Epoch > 0 && pod.Epoch <= status.DeprecatedEpoch) {
			// Not of the group that is to sync: Pods of a group that was
			// suspended or restarted, whose agents' restarts are theirs.
			continue
		}
		if pod.AgentRestarts > maxRestarts {
			return fmt.Sprintf("%s: the agent of Pod %s restarted %d times before the group first synced, more than maxRestarts (%d)",
				MessageReachedMaxRestarts, pod.First(), pod.AgentRestarts, maxRestarts)
		}
	}
	return ""
}

// suspendOrResume brings spec.suspend of every current Job in line with the
// JobSet's: all suspended at once, resumed in startup order.
func (p *Plan) suspendOrResume(js *jobset.JobSet, c state.Children, suspended bool, allowed []bool, prio Priorities, now metav1.Time) {
	index := make(map[string]int, len(js.Spec.ReplicatedJobs))
	for i, rj := range js.Spec.ReplicatedJobs {
		index[rj.Name] = i
	}
	switch {
	case suspended && c.Total(func(r *state.JobCounts) int32 { return r.Unfinished - r.Suspended }) > 0:
		p.SuspendJobs = c.List(func(j *state.JobFacts, kind state.JobKind) bool {
			return kind == state.Current && !j.Failed && !j.Complete && !j.Suspended
		})
	case !suspended && c.Total(func(r *state.JobCounts) int32 { return r.Suspended }) > 0:
		for _, job := range c.List(func(j *state.JobFacts, kind state.JobKind) bool {
			return kind == state.Current && !j.Failed && !j.Complete && j.Suspended && allowed[index[j.ReplicatedJob]]
		}) {
			p.ResumeJobs = append(p.ResumeJobs, JobUpdate{Cached: job, Want: resumedJob(js, job, prio)})
		}
	}

	if suspended && !conditionTrue(&p.Status, jobset.JobSetSuspended) {
		p.suspendJobSet(js, now)
	}
	if !suspended && conditionTrue(&p.Status, jobset.JobSetSuspended) {
		p.apply(js, resume, move{}, now)
	}
}

// suspendJobSet applies the suspension of the JobSet. An in-place restart
// under way ends with it: nothing is left to converge, and no timeout may
// recreate the Jobs of a JobSet that is not running. A recreation under
// way goes on: its Jobs are replaced, suspended, and it ends once they run.
func (p *Plan) suspendJobSet(js *jobset.JobSet, now metav1.Time) {
	if jobset.InPlaceActive(js) && jobset.RestartStateOf(js, &p.Status).InPlaceRestarting() {
		p.apply(js, suspendInPlaceRestart, move{message: fmt.Sprintf(
			"the JobSet was suspended during an in-place restart of epoch %d: its Pods stop, and start a fresh epoch when it is resumed", p.Status.SyncedEpoch)}, now)
		return
	}
	p.apply(js, suspend, move{}, now)
}

// blockedByPreviousAttempt reports whether BlockingRecreate must wait: no Job
// of a new attempt is created while any Job or Pod of an earlier one exists.
func blockedByPreviousAttempt(js *jobset.JobSet, c state.Children) bool {
	if js.Spec.FailurePolicy == nil || js.Spec.FailurePolicy.RestartStrategy != jobset.BlockingRecreate {
		return false
	}
	return c.Previous > 0 || c.Terminating > 0 || c.Family.PodsNotOf(strconv.Itoa(int(jobset.RecreateAttempt(&js.Status)))) > 0
}

// missingJobs returns the Jobs of the current attempt that do not exist yet
// and whose replicated Job may start. While suspended every Job is created,
// suspended, so that resuming needs no creation.
func missingJobs(js *jobset.JobSet, c state.Children, suspended bool, allowed []bool, prio Priorities) []*batchv1.Job {
	var out []*batchv1.Job
	for i, rj := range js.Spec.ReplicatedJobs {
		if !suspended && !allowed[i] {
			continue
		}
		if c.Counts(rj.Name).Named >= rj.Replicas {
			// Every index has its Job: no name to build.
			continue
		}
		for index := range int(rj.Replicas) {
			name := state.JobName(js.Name, rj.Name, index)
			if c.Taken(name) {
				continue
			}
			out = append(out, buildJob(js, i, index, suspended, prio))
		}
	}
	return out
}

// allStarted reports whether every replicated Job has all its Jobs ready or
// succeeded.
func allStarted(js *jobset.JobSet, statuses []jobset.ReplicatedJobStatus) bool {
	for _, rj := range js.Spec.ReplicatedJobs {
		if !started(rj, statusOf(statuses, rj.Name)) {
			return false
		}
	}
	return true
}

// fallBackIfStuck recreates the Jobs when an in-place restart has not
// converged within the timeout (a Pod that cannot come back, say), as the
// short-term in-place restart KEP's inplace-timeout does. The restart was
// counted when it began; the fallback does not count again.
func (p *Plan) fallBackIfStuck(js *jobset.JobSet, now metav1.Time, timeout time.Duration) bool {
	if !jobset.RestartStateOf(js, &p.Status).InPlaceRestarting() {
		return false
	}
	// The condition says an in-place restart is under way, and since when.
	c := meta.FindStatusCondition(p.Status.Conditions, string(jobset.JobSetRestarting))
	deadline := c.LastTransitionTime.Add(timeout)
	if now.Time.Before(deadline) {
		p.RequeueWithin(deadline.Sub(now.Time))
		return false
	}
	p.apply(js, inPlaceTimedOut, move{message: fmt.Sprintf("the in-place restart did not converge within %s (epoch %d never synced): recreating every Job",
		timeout, p.Status.SyncedEpoch+1)}, now)
	return true
}
