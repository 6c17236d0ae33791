package controller

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

// observed is what the reconciler read about a JobSet's children.
type observed struct {
	// fam is the JobSet's Jobs and Pods, counted under its view
	// (family.setView); decide reads them and does not change them.
	fam *family
	// jobs and pods are whole lists of the JobSet's children, read when
	// fam is nil (the tests build the world they decide on this way).
	jobs []batchv1.Job
	pods []corev1.Pod
	// serviceExists reports whether the headless Service exists.
	serviceExists bool
	// claims holds the names of the JobSet's volume claims that exist.
	claims map[string]bool
	// broadcast is the data of the broadcast ConfigMap of an InPlaceRestart
	// JobSet; nil if it does not exist.
	broadcast map[string]string
	// creating names the Jobs created by an earlier reconcile that jobs,
	// read from the cache, does not show yet: they are not created again.
	creating map[string]bool
	// deleting holds the UIDs of the Jobs deleted by an earlier reconcile
	// that jobs still shows as not being deleted: they are not deleted
	// again.
	deleting map[types.UID]bool
}

// event is an Event to record on the JobSet once the status is written.
type event struct {
	eventType, reason, message string
}

// plan is everything one reconcile does, decided by decide without I/O.
type plan struct {
	status      jobset.JobSetStatus
	createJobs  []*batchv1.Job
	deleteJobs  []*batchv1.Job
	suspendJobs []*batchv1.Job
	// resumeJobs are the Jobs to unsuspend, each with what it must become:
	// the Pod template's scheduling directives changed while it was
	// suspended go on with the resume, in one write.
	resumeJobs []jobUpdate
	// scaleJobs are Jobs whose parallelism and completions must become
	// their replicated job's (elastic replicated jobs, scaling.go).
	scaleJobs []jobScale
	service   *corev1.Service
	// createPVCs are the claims of spec.volumeClaimPolicies that do not
	// exist yet; they are created before any Job, whose Pods mount them.
	createPVCs []*corev1.PersistentVolumeClaim
	// deletePods are Pods that must stop and cannot by themselves: a fatal
	// exit while other containers run (stuckFatal), workers that escaped a
	// restart (stopEscapedWorkers). Each Event is recorded once the Pod's
	// deletion succeeded.
	deletePods []podDeletion
	// broadcast, if set, is the data the broadcast ConfigMap must hold.
	broadcast    map[string]string
	deleteJobSet bool
	requeueAfter time.Duration
	// events are the decisions' Events, recorded once the status that
	// carries them is written.
	events []event
	// warnings are Events about what was observed (bad input), recorded on
	// every reconcile that observes it.
	warnings []event
}

// decide computes the plan for a defaulted JobSet from what was observed.
// The order of the steps matters:
//
//	finished? ── yes ─▶ delete active Jobs, honour TTL
//	   │ no
//	delete Jobs of earlier attempts
//	failed Jobs? ── yes ─▶ failure policy (restart or fail), nothing else
//	   │ no
//	success policy met? ── yes ─▶ Completed
//	   │ no
//	headless Service, volume claims, suspend/resume, scale, create missing
//	Jobs in startup order
func decide(js *jobset.JobSet, obs observed, now metav1.Time, inPlaceTimeout time.Duration) plan {
	p := decideSteps(js, obs, now, inPlaceTimeout)
	inStepWithEpochs(&p.status)
	return p
}

func decideSteps(js *jobset.JobSet, obs observed, now metav1.Time, inPlaceTimeout time.Duration) plan {
	p := plan{status: *js.Status.DeepCopy()}
	fam := obs.fam
	if fam == nil {
		fam = familyOf(js, obs.jobs, obs.pods)
	}
	c := classifyJobs(fam, obs.deleting, obs.creating)

	if finished(&p.status) {
		p.deleteJobs = append(p.deleteJobs, c.active()...)
		p.deleteJobs = append(p.deleteJobs, c.previousJobs()...)
		p.deleteJobSet, p.requeueAfter = ttlDecision(js, now.Time)
		return p
	}

	p.deleteJobs = c.previousJobs()
	// From the plan's deep copy, not js.Status: the counters are the
	// plan's to change.
	p.status.ReplicatedJobsStatus = replicatedJobsStatus(js, p.status.ReplicatedJobsStatus, c)

	if failed := c.failed(); len(failed) > 0 {
		p.events = applyFailure(js, &p.status, decideFailure(js, failed), now)
		return p
	}

	if successPolicyMet(js, p.status.ReplicatedJobsStatus) {
		p.status.TerminalState = jobset.TerminalStateCompleted
		setCondition(&p.status, jobset.JobSetCompleted, metav1.ConditionTrue, ReasonAllJobsCompleted, MessageAllJobsCompleted, now)
		endTransientConditions(&p.status, now)
		p.events = append(p.events, event{corev1.EventTypeNormal, ReasonAllJobsCompleted, MessageAllJobsCompleted})
		return p
	}

	if dnsHostnamesEnabled(js) && !obs.serviceExists {
		p.service = buildService(js)
	}
	// Suspended or not: the claims exist before the Jobs, which are created
	// suspended while the JobSet is.
	p.createPVCs = missingClaims(js, obs.claims)

	suspended := ptr.Deref(js.Spec.Suspend, false)
	allowed := startupGate(js, p.status.ReplicatedJobsStatus)
	if inPlaceActive(js) {
		// Every Pod must report an epoch before any barrier lifts, so every
		// Job is created at once; the barriers then lift in startup order.
		for i := range allowed {
			allowed[i] = true
		}
	}
	p.suspendOrResume(js, c, suspended, allowed, now)
	p.scaleJobs = jobsToScale(js, c)
	if !blockedByPreviousAttempt(js, c) {
		p.createJobs = missingJobs(js, c, suspended, allowed)
	}

	if !suspended {
		updateStartupConditions(js, &p.status, now)
	}
	switch {
	case inPlaceActive(js) && suspended:
		p.suspendEpochs(js, obs.broadcast, now)
	case inPlace(js) && c.total(func(r *rjCounts) int32 { return r.failing }) == 0:
		// A Job the Job controller is failing (FailureTarget) deletes its
		// Pods before it is marked Failed: the failure policy decides, not
		// an in-place restart.
		p.reconcileEpochs(js, fam, obs.broadcast, now, inPlaceTimeout)
	}
	if !inPlaceActive(js) && conditionTrue(&p.status, jobset.JobSetRestarting) && allStarted(js, p.status.ReplicatedJobsStatus) {
		setCondition(&p.status, jobset.JobSetRestarting, metav1.ConditionFalse, ReasonRestartJobsReady, MessageRestartJobsReady, now)
	}
	return p
}

func inPlace(js *jobset.JobSet) bool {
	return js.Spec.FailurePolicy != nil && js.Spec.FailurePolicy.RestartStrategy == jobset.InPlaceRestart
}

// inPlaceActive reports whether the JobSet restarts in place: InPlaceRestart
// without upstream JobSet's disable-in-place-restart annotation. A JobSet
// with it still has its broadcast (its agents stand aside), but no agents'
// grants, no epochs decided, and the startup order of any other JobSet.
func inPlaceActive(js *jobset.JobSet) bool {
	_, disabled := js.Annotations[jobset.DisableInPlaceRestartKey]
	return inPlace(js) && !disabled
}

// reconcileEpochs runs the in-place restart protocol: the epochs from the
// Pods of the current attempt, the restart they may start, counted against
// maxRestarts, and the broadcast the agents watch.
func (p *plan) reconcileEpochs(js *jobset.JobSet, fam *family, broadcast map[string]string, now metav1.Time, timeout time.Duration) {
	if !inPlaceActive(js) {
		// In-place restarts are off: the agents lift their barriers at
		// once and never report, so the epochs stay where they are, no
		// restart is decided or counted here and none times out; a Pod
		// that fails is replaced by its Job, as without InPlaceRestart.
		want := protocol.EncodeBroadcast(protocol.Broadcast{DeprecatedEpoch: js.Status.DeprecatedEpoch, SyncedEpoch: js.Status.SyncedEpoch, Disabled: true})
		if !maps.Equal(want, broadcast) {
			p.broadcast = want
		}
		return
	}
	pods := fam.podGroups(js, strconv.Itoa(int(recreateAttempt(&js.Status))))
	for _, uneven := range unevenJobs(js) {
		p.warnings = append(p.warnings, event{corev1.EventTypeWarning, ReasonInvalidInPlaceRestartJobs, fmt.Sprintf(
			"InPlaceRestart needs completions == parallelism in every Job: %s; the group is expected to have %d Pods", uneven, expectedPods(js))})
	}
	for _, g := range pods {
		if g.invalidEpoch == "" {
			continue
		}
		for _, name := range g.sortedNames() {
			p.warnings = append(p.warnings, event{corev1.EventTypeWarning, ReasonInvalidEpoch, fmt.Sprintf(
				"Pod %s reports epoch %q on annotation %s, %s: it counts as not reported, and the group cannot sync until its agent writes a valid one",
				name, g.invalidEpoch, g.epochKey, g.invalidWhy)})
		}
	}
	for _, g := range pods {
		for _, pod := range g.stuck {
			p.deletePods = append(p.deletePods, podDeletion{pod, event{corev1.EventTypeWarning, ReasonFatalExitPodDeleted, fmt.Sprintf(
				"container %s of Pod %s exited with a code its Job's podFailurePolicy makes FailJob while its other containers still run: deleted the Pod so that it fails, and its Job with it",
				g.workerExited, pod.Name)}})
		}
	}
	if msg := crashLoop(js, &p.status, pods); msg != "" && !slices.ContainsFunc(pods, func(p podGroup) bool { return p.fatal }) {
		p.events = append(p.events, failJobSet(&p.status, ReasonReachedMaxRestarts, msg, now)...)
		return
	}
	d := decideEpochs(js, pods)
	p.status.DeprecatedEpoch, p.status.SyncedEpoch, p.status.SyncedPods = d.deprecated, d.synced, d.syncedPods

	if d.scaleBegan {
		// Not a restart for the counters: nothing failed.
		msg := fmt.Sprintf("in-place restart for a scale: %s; epoch %d deprecated, the group syncs again at its new size (not counted towards maxRestarts)", d.why, d.deprecated)
		setCondition(&p.status, jobset.JobSetRestarting, metav1.ConditionTrue, ReasonInPlaceScale, msg, now)
		p.events = append(p.events, event{corev1.EventTypeNormal, ReasonInPlaceScale, msg})
	}

	if d.restartBegan {
		maxRestarts := js.Spec.FailurePolicy.MaxRestarts
		if !d.uncounted && countedRestarts(&p.status) >= maxRestarts {
			p.events = append(p.events, failJobSet(&p.status, ReasonReachedMaxRestarts,
				fmt.Sprintf("%s (in place, after %d restarts: %s)", MessageReachedMaxRestarts, maxRestarts, d.why), now)...)
			return
		}
		if who := finishedMember(pods); who != "" {
			// A member whose Pod succeeded has no agent left to restart:
			// waiting for it would only end at the timeout. The Jobs are
			// recreated at once instead, one restart counted.
			p.recreate(ReasonInPlaceRestartImpossible, fmt.Sprintf("%s, and Pod %s has finished, which cannot restart in place: recreating every Job (restart %d)",
				d.why, who, p.status.Restarts+1), !d.uncounted, now)
			return
		}
		p.status.Restarts++
		p.status.InPlaceRestarts++
		msg := fmt.Sprintf("in-place restart %d: %s; epoch %d deprecated", p.status.InPlaceRestarts, d.why, d.deprecated)
		if d.uncounted {
			msg += " (not counted towards maxRestarts)"
		} else {
			p.status.RestartsCountTowardsMax++
		}
		setCondition(&p.status, jobset.JobSetRestarting, metav1.ConditionTrue, ReasonInPlaceRestart, msg, now)
		p.events = append(p.events, event{corev1.EventTypeWarning, ReasonInPlaceRestart, msg})
	}
	if conditionTrue(&p.status, jobset.JobSetRestarting) && d.synced > d.deprecated {
		msg := fmt.Sprintf("every Pod restarted in place and synced at epoch %d (%d Pods)", d.synced, d.syncedPods)
		setCondition(&p.status, jobset.JobSetRestarting, metav1.ConditionFalse, ReasonInPlaceRestartDone, msg, now)
		p.events = append(p.events, event{corev1.EventTypeNormal, ReasonInPlaceRestartDone, msg})
	}

	if p.fallBackIfStuck(now, timeout) {
		return
	}
	if restartStateOf(js, &p.status) == stateRestarting {
		p.stopEscapedWorkers(pods, d.deprecated)
	}

	want := protocol.EncodeBroadcast(protocol.Broadcast{DeprecatedEpoch: d.deprecated, SyncedEpoch: d.synced, OpenReplicatedJobs: d.openReplicatedJobs})
	if !maps.Equal(want, broadcast) {
		p.broadcast = want
	}
}

// suspendEpochs ends the group of a suspended JobSet, which is no failure:
// a suspension (Kueue's admission and preemption lever) stops every Pod
// with its Job, and nothing of the group survives to restart. The synced
// epoch is over without a restart counted: deprecatedEpoch catches up with
// it, so that the Pods started on resume report a fresh epoch and wait
// behind the barrier until all of them have, as on a first start. An
// in-place restart under way ends here too: nothing is left to converge,
// and no timeout may recreate the Jobs of a JobSet that is not running.
func (p *plan) suspendEpochs(js *jobset.JobSet, broadcast map[string]string, now metav1.Time) {
	p.status.DeprecatedEpoch = max(p.status.DeprecatedEpoch, p.status.SyncedEpoch)
	if inPlaceRestartCondition(&p.status) != nil {
		msg := fmt.Sprintf("the JobSet was suspended during an in-place restart of epoch %d: its Pods stop, and start a fresh epoch when it is resumed", p.status.SyncedEpoch)
		setCondition(&p.status, jobset.JobSetRestarting, metav1.ConditionFalse, ReasonInPlaceRestartSuspended, msg, now)
		p.events = append(p.events, event{corev1.EventTypeNormal, ReasonInPlaceRestartSuspended, msg})
	}
	want := protocol.EncodeBroadcast(protocol.Broadcast{DeprecatedEpoch: p.status.DeprecatedEpoch, SyncedEpoch: p.status.SyncedEpoch})
	if !maps.Equal(want, broadcast) {
		p.broadcast = want
	}
}

// inPlaceReason reports whether a Restarting condition's reason is that of
// an in-place restart, which its timeout bounds.
func inPlaceReason(reason string) bool {
	return reason == ReasonInPlaceRestart || reason == ReasonInPlaceScale
}

// podDeletion is a Pod to delete and the Event that says why.
type podDeletion struct {
	pod *corev1.Pod
	why event
}

// stopEscapedWorkers deletes, during an in-place restart, the Pods of a
// deprecated epoch whose agent crash-loops while their workers run: an
// agent in CrashLoopBackOff cannot see the deprecation, so its workers
// would go on at the old epoch, beside a group that moved on, until the
// in-place timeout. Deleted, the Pod stops its workers and its Job
// replaces it with a Pod that joins the new epoch.
func (p *plan) stopEscapedWorkers(pods []podGroup, deprecated int32) {
	for _, g := range pods {
		if !g.agentCrashLooping || g.gone || g.epoch == 0 || g.epoch > deprecated {
			continue
		}
		for _, pod := range g.pods {
			p.deletePods = append(p.deletePods, podDeletion{pod, event{corev1.EventTypeWarning, ReasonAgentCrashLoopPodDeleted, fmt.Sprintf(
				"the agent of Pod %s was in CrashLoopBackOff while its workers ran at epoch %d, which is deprecated: deleted the Pod so that its workers stop; its Job replaces it",
				pod.Name, g.epoch)}})
		}
	}
}

// finishedMember names a Pod of the group that succeeded, or "".
func finishedMember(pods []podGroup) string {
	for _, g := range pods {
		if g.finished {
			return g.first()
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
func crashLoop(js *jobset.JobSet, status *jobset.JobSetStatus, pods []podGroup) string {
	if restartStateOf(js, status) != stateStarting {
		return ""
	}
	maxRestarts := js.Spec.FailurePolicy.MaxRestarts
	for _, pod := range pods {
		if pod.gone || pod.finished || (pod.epoch > 0 && pod.epoch <= status.DeprecatedEpoch) {
			// Not of the group that is to sync: Pods of a group that was
			// suspended or restarted, whose agents' restarts are theirs.
			continue
		}
		if pod.agentRestarts > maxRestarts {
			return fmt.Sprintf("%s: the agent of Pod %s restarted %d times before the group first synced, more than maxRestarts (%d)",
				MessageReachedMaxRestarts, pod.first(), pod.agentRestarts, maxRestarts)
		}
	}
	return ""
}

// suspendOrResume brings spec.suspend of every current Job in line with the
// JobSet's: all suspended at once, resumed in startup order.
func (p *plan) suspendOrResume(js *jobset.JobSet, c children, suspended bool, allowed []bool, now metav1.Time) {
	index := make(map[string]int, len(js.Spec.ReplicatedJobs))
	for i, rj := range js.Spec.ReplicatedJobs {
		index[rj.Name] = i
	}
	switch {
	case suspended && c.total(func(r *rjCounts) int32 { return r.unfinished - r.suspended }) > 0:
		p.suspendJobs = c.list(func(j *jobFacts, kind jobKind) bool {
			return kind == current && !j.failed && !j.complete && !j.suspended
		})
	case !suspended && c.total(func(r *rjCounts) int32 { return r.suspended }) > 0:
		for _, job := range c.list(func(j *jobFacts, kind jobKind) bool {
			return kind == current && !j.failed && !j.complete && j.suspended && allowed[index[j.rj]]
		}) {
			p.resumeJobs = append(p.resumeJobs, jobUpdate{cached: job, want: resumedJob(js, job)})
		}
	}

	if suspended && !conditionTrue(&p.status, jobset.JobSetSuspended) {
		setCondition(&p.status, jobset.JobSetSuspended, metav1.ConditionTrue, ReasonSuspended, MessageSuspended, now)
		resetStartup(&p.status, now)
		p.events = append(p.events, event{corev1.EventTypeNormal, ReasonSuspended, MessageSuspended})
	}
	if !suspended && conditionTrue(&p.status, jobset.JobSetSuspended) {
		setCondition(&p.status, jobset.JobSetSuspended, metav1.ConditionFalse, ReasonResumed, MessageResumed, now)
		p.events = append(p.events, event{corev1.EventTypeNormal, ReasonResumed, MessageResumed})
	}
}

// blockedByPreviousAttempt reports whether BlockingRecreate must wait: no Job
// of a new attempt is created while any Job or Pod of an earlier one exists.
func blockedByPreviousAttempt(js *jobset.JobSet, c children) bool {
	if js.Spec.FailurePolicy == nil || js.Spec.FailurePolicy.RestartStrategy != jobset.BlockingRecreate {
		return false
	}
	return c.previous > 0 || c.terminating > 0 || c.fam.podsNotOf(strconv.Itoa(int(recreateAttempt(&js.Status)))) > 0
}

// missingJobs returns the Jobs of the current attempt that do not exist yet
// and whose replicated Job may start. While suspended every Job is created,
// suspended, so that resuming needs no creation.
func missingJobs(js *jobset.JobSet, c children, suspended bool, allowed []bool) []*batchv1.Job {
	var out []*batchv1.Job
	for i, rj := range js.Spec.ReplicatedJobs {
		if !suspended && !allowed[i] {
			continue
		}
		if c.counts(rj.Name).named >= rj.Replicas {
			// Every index has its Job: no name to build.
			continue
		}
		for index := range int(rj.Replicas) {
			name := JobName(js.Name, rj.Name, index)
			if c.taken(name) {
				continue
			}
			out = append(out, buildJob(js, i, index, suspended))
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
func (p *plan) fallBackIfStuck(now metav1.Time, timeout time.Duration) bool {
	c := inPlaceRestartCondition(&p.status)
	if c == nil {
		return false
	}
	deadline := c.LastTransitionTime.Add(timeout)
	if now.Time.Before(deadline) {
		p.requeueAfter = deadline.Sub(now.Time)
		return false
	}
	p.recreate(ReasonInPlaceRestartTimedOut, fmt.Sprintf("the in-place restart did not converge within %s (epoch %d never synced): recreating every Job",
		timeout, p.status.SyncedEpoch+1), false, now)
	return true
}

// recreate gives up the in-place path for this restart: the restart
// attempt moves on, so the next reconcile replaces every Job, and the
// Pods of the new Jobs start a fresh epoch. counted says whether it counts
// towards maxRestarts: not when the in-place restart it ends was counted
// already.
func (p *plan) recreate(reason, msg string, counted bool, now metav1.Time) {
	p.status.Restarts++
	if counted {
		p.status.RestartsCountTowardsMax++
	}
	p.status.DeprecatedEpoch = p.status.SyncedEpoch
	setCondition(&p.status, jobset.JobSetRestarting, metav1.ConditionTrue, reason, msg, now)
	p.events = append(p.events, event{corev1.EventTypeWarning, reason, msg})
}
