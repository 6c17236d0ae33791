package controller

import (
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/podfailure"
)

// This file decides the epochs of an InPlaceRestart JobSet from its Pods,
// following the in-place restart KEP's reconcileEpochs:
//
//   - every expected Pod reports the same epoch e above syncedEpoch:
//     syncedEpoch = e, and the agents at e lift their barrier;
//   - epochs differ: deprecatedEpoch = max(epochs) - 1, and every agent at
//     or below it restarts its Pod in place;
//
// with fast failure detection on top: once a group is synced, the restart
// begins the moment one of its workers terminates, its Pod fails or is
// deleted, or one of its agents moves to a new epoch, instead of waiting for
// the failed Pod's agent to come back and report (deprecatedEpoch =
// syncedEpoch).

// podEpoch is what the epoch decision needs of one Pod.
type podEpoch struct {
	name          string
	replicatedJob string
	// epoch reported by the Pod's agent; 0 before it reported.
	epoch int32
	// gone: the Pod failed or is being deleted.
	gone bool
	// fatal: the Pod failed with an exit code its Job's podFailurePolicy
	// turns into a Job failure; the failure policy, not an in-place
	// restart, decides what follows.
	fatal bool
	// ignored: the Pod failed or is being deleted for a reason its Job's
	// podFailurePolicy ignores (action Ignore, say on DisruptionTarget):
	// the group restarts without it, and the restart does not count
	// towards maxRestarts, as the Job does not count the Pod's failure
	// towards its backoffLimit.
	ignored bool
	// workerExited names a worker container that terminated, if any.
	workerExited string
	// finished: the Pod succeeded, its workers done. It cannot restart in
	// place: its agent is gone with it.
	finished bool
	ready    bool
	// invalidEpoch is an epoch annotation the controller cannot use (the
	// Pod then counts as not reported): not a positive number, or, once
	// the JobSet is known (boundEpoch), beyond syncedEpoch + 1.
	invalidEpoch string
	// invalidWhy says why invalidEpoch cannot be used.
	invalidWhy string
	// epochKey is the annotation the epoch was read from: EpochKey, or
	// upstream JobSet's InPlaceRestartAttemptKey.
	epochKey string
	// rawEpoch is the annotation's value as written.
	rawEpoch string
	// agentRestarts counts the restarts of the Pod's agent container.
	agentRestarts int32
	// agentCrashLooping: the agent waits in CrashLoopBackOff while a worker
	// of its Pod runs. It cannot see a deprecated epoch, so its Pod cannot
	// restart in place.
	agentCrashLooping bool
}

// epochDecision is the outcome for the status and the broadcast.
type epochDecision struct {
	deprecated, synced int32
	// syncedPods is the size of the group at its last sync.
	syncedPods int32
	// restartBegan: this decision starts a new in-place restart.
	restartBegan bool
	// scaleBegan: this decision starts an in-place restart of the group at
	// a new size (scaling.go), which does not count towards maxRestarts.
	scaleBegan bool
	// uncounted: the restart began for a loss the Job's podFailurePolicy
	// ignores, and does not count towards maxRestarts.
	uncounted bool
	// why the restart began, for the condition and the Event.
	why string
	// openReplicatedJobs may lift their barrier; nil means all.
	openReplicatedJobs []string
}

// judgePod says what the Job controller will make of a suspect Pod (failed,
// being deleted, or with an exited worker) under its Job's podFailurePolicy
// pfp, as it judges a failed Pod (podfailure.MatchPod): fatal if it fails
// the Job, ignored if the Pod is gone for a reason the policy ignores. A
// Pod that is not Failed yet is judged by its workers' own exits so far:
// with the agent sidecar still running, the kubelet keeps such a Pod
// Running (a running restartable init container counts as running) until
// it has stopped the sidecar, and an in-place restart decided in that
// window would restart the Pod and defeat the FailJob. Only regular
// containers count there, never the agent.
func judgePod(pfp *batchv1.PodFailurePolicy, pod *corev1.Pod, gone bool) (fatal, ignored bool) {
	judged := pod
	if pod.Status.Phase != corev1.PodFailed {
		// Judged as the Job controller will judge it once it fails: by the
		// workers' own exits so far (not the agent's, not a stop for a
		// restart of all containers) and its conditions.
		judged = &corev1.Pod{Status: corev1.PodStatus{Conditions: pod.Status.Conditions}}
		for _, s := range pod.Status.ContainerStatuses {
			if t := s.State.Terminated; t != nil && t.Reason != protocol.ReasonRestartingAllContainers {
				judged.Status.ContainerStatuses = append(judged.Status.ContainerStatuses, s)
			}
		}
	}
	action, matched := podfailure.MatchPod(pfp, judged)
	return matched && action == batchv1.PodFailurePolicyActionFailJob, matched && gone && action == batchv1.PodFailurePolicyActionIgnore
}

// boundEpoch takes an epoch beyond what an agent of js reports as not
// reported. An agent reports syncedEpoch + 1 at most: it starts at the
// broadcast's syncedEpoch + 1, and the broadcast follows the status, whose
// syncedEpoch never decreases. A higher epoch was written by something
// else (a worker shares its Pod's token, which may patch the annotation):
// taken as reported, it would deprecate every epoch below it, the agents'
// next one included, restart after restart. The agents' admission policy
// cannot refuse it, as the bound lives in the JobSet's status.
func boundEpoch(js *jobset.JobSet, p podEpoch) podEpoch {
	if bound := int64(js.Status.SyncedEpoch) + 1; int64(p.epoch) > bound {
		p.invalidEpoch = p.rawEpoch
		p.invalidWhy = fmt.Sprintf("which is beyond syncedEpoch + 1 (%d), the most an agent reports", bound)
		if p.epochKey == jobset.InPlaceRestartAttemptKey {
			p.invalidWhy = fmt.Sprintf("which is beyond currentInPlaceRestartAttempt + 1 (%d), the most an agent reports", bound-1)
		}
		p.epoch = 0
	}
	return p
}

func podFailurePolicy(js *jobset.JobSet, replicatedJob string) *batchv1.PodFailurePolicy {
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == replicatedJob {
			return rj.Template.Spec.PodFailurePolicy
		}
	}
	return nil
}

// stuckFatal reports whether a fatal Pod (a worker exited with a code its
// Job's podFailurePolicy makes FailJob) will not fail by itself: it is not
// failed or being deleted, and another of its regular containers has not
// terminated. The kubelet fails a Pod whose restartPolicy is Never only
// once every regular container has terminated, so with a second worker
// still running (waiting on its dead peer, as distributed workers do) the
// Pod, its Job and the JobSet would wait forever.
func stuckFatal(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil {
		return false
	}
	terminated := 0
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Terminated != nil && s.State.Terminated.Reason != protocol.ReasonRestartingAllContainers {
			terminated++
		}
	}
	return terminated < len(pod.Spec.Containers)
}

// crashLoopBackOff is the reason the kubelet gives a container it waits to
// start again after it exited too often.
const crashLoopBackOff = "CrashLoopBackOff"

// observePod extracts the epoch facts of a Pod.
func observePod(pod *corev1.Pod) podEpoch {
	p := podEpoch{
		name:          pod.Name,
		replicatedJob: pod.Labels[jobset.ReplicatedJobNameKey],
		gone:          pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed,
		finished:      pod.Status.Phase == corev1.PodSucceeded,
	}
	if raw, ok := pod.Annotations[jobset.EpochKey]; ok {
		p.epochKey, p.rawEpoch = jobset.EpochKey, raw
		if v, err := protocol.ParseEpoch(raw, false); err == nil && v > 0 {
			p.epoch = v
		} else {
			p.invalidEpoch, p.invalidWhy = raw, "which is not a positive number"
		}
	} else if raw, ok := pod.Annotations[jobset.InPlaceRestartAttemptKey]; ok {
		// An agent written for upstream JobSet: its attempts count from 0.
		p.epochKey, p.rawEpoch = jobset.InPlaceRestartAttemptKey, raw
		if v, err := protocol.ParseEpoch(raw, true); err == nil {
			p.epoch = v
		} else {
			p.invalidEpoch, p.invalidWhy = raw, "which is not a non-negative number"
		}
	}
	if agent := agentContainerName(pod); agent != "" {
		for _, s := range pod.Status.InitContainerStatuses {
			if s.Name == agent {
				p.agentRestarts = s.RestartCount
				// The workers are looked at only for an agent in back-off:
				// this runs on every event of every Pod.
				p.agentCrashLooping = s.State.Waiting != nil && s.State.Waiting.Reason == crashLoopBackOff &&
					slices.ContainsFunc(pod.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.State.Running != nil })
			}
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Terminated != nil && s.State.Terminated.ExitCode != 0 {
			p.workerExited = s.Name
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			p.ready = true
		}
	}
	return p
}

// agentContainerName is the name of the Pod's agent: the sidecar whose
// environment carries the restart exit code (the webhook injects it under
// a name the configuration may change), or upstream JobSet's agent.
func agentContainerName(pod *corev1.Pod) string {
	for _, c := range pod.Spec.InitContainers {
		names := func(yield func(string) bool) {
			for _, e := range c.Env {
				if !yield(e.Name) {
					return
				}
			}
		}
		for name := range names {
			if name == protocol.EnvRestartExitCode {
				return c.Name
			}
		}
		if protocol.IsUpstreamAgent(c.Name, names) {
			return c.Name
		}
	}
	return ""
}

// expectedPods is the number of Pods that must report an epoch: every Job
// of every replicated job runs as many Pods at once as its parallelism
// and completions allow.
func expectedPods(js *jobset.JobSet) int {
	n := 0
	for _, rj := range js.Spec.ReplicatedJobs {
		n += int(rj.Replicas) * int(podsPerJob(rj))
	}
	return n
}

func podsPerJob(rj jobset.ReplicatedJob) int32 {
	pods := ptr.Deref(rj.Template.Spec.Parallelism, 1)
	if c := rj.Template.Spec.Completions; c != nil {
		pods = min(pods, *c)
	}
	return pods
}

// unevenJobs says which replicated jobs' Jobs set completions other than
// parallelism, which InPlaceRestart needs (with fewer completions the
// group is short for good once they are reached). Admission refuses them
// (and sets completions where it is unset), unless its built-in policy was
// disabled.
func unevenJobs(js *jobset.JobSet) []string {
	var out []string
	for _, rj := range js.Spec.ReplicatedJobs {
		parallelism := ptr.Deref(rj.Template.Spec.Parallelism, 1)
		if c := rj.Template.Spec.Completions; c != nil && *c != parallelism {
			out = append(out, fmt.Sprintf("replicated job %s: completions %d, parallelism %d", rj.Name, *c, parallelism))
		}
	}
	return out
}

// decideEpochs computes the next epochs from the current status and the
// Pods of the current attempt, by group: a synced group of any size is a
// handful of groups, and what decides is how many Pods of each there are.
func decideEpochs(js *jobset.JobSet, pods []podGroup) epochDecision {
	d := epochDecision{deprecated: js.Status.DeprecatedEpoch, synced: js.Status.SyncedEpoch, syncedPods: js.Status.SyncedPods}
	if slices.ContainsFunc(pods, func(p podGroup) bool { return p.fatal }) {
		// That Pod's Job is about to fail, and its Job controller to delete
		// the Job's other Pods: the failure policy decides, not an in-place
		// restart. Nothing changes until then.
		d.openReplicatedJobs = openBarriers(js, pods, d.synced)
		return d
	}
	inRestart := d.deprecated >= d.synced && d.synced > 0
	expected := expectedPods(js)
	if d.synced > 0 && !inRestart {
		pods = invalidAsSynced(pods, d.synced)
	}

	alive := make([]podGroup, 0, len(pods))
	aliveN := 0
	maxEpoch, allEqual, allReported := int32(0), true, true
	for _, p := range pods {
		if p.gone {
			continue
		}
		alive = append(alive, p)
		aliveN += p.n()
		if p.finished && p.epoch <= d.deprecated {
			// Done in an earlier epoch (a Job that completed before a
			// suspension, say, which a resume does not start again): a
			// member that reports no more, and holds no sync back.
			continue
		}
		if p.epoch == 0 {
			allReported = false
			continue
		}
		if maxEpoch != 0 && p.epoch != maxEpoch {
			allEqual = false
		}
		maxEpoch = max(maxEpoch, p.epoch)
	}

	// Sync: every expected Pod at one epoch newer than the synced one.
	if aliveN == expected && allReported && allEqual && maxEpoch > d.synced && maxEpoch > d.deprecated {
		d.synced, d.syncedPods = maxEpoch, int32(expected)
		d.openReplicatedJobs = openBarriers(js, alive, d.synced)
		return d
	}

	// Scale: the synced group is no longer the size the templates ask for.
	// Every member restarts in place and the group syncs again at its new
	// size: the new Pods' agents report synced+1 and the survivors join
	// them; on a scale down the Pods of the dropped indexes are deleted by
	// their Job and leave the group. Nothing failed: a failure seen at the
	// same moment is part of this restart, as any failure during a restart
	// is. A group synced before syncedPods was recorded (0) has no size to
	// compare and syncs as before.
	if d.synced > 0 && !inRestart && d.syncedPods > 0 && int(d.syncedPods) != expected {
		d.deprecated = max(d.synced, maxEpoch-1)
		d.scaleBegan = true
		d.why = fmt.Sprintf("the group was scaled from %d to %d Pods", d.syncedPods, expected)
		d.openReplicatedJobs = openBarriers(js, alive, d.synced)
		return d
	}

	// Fast detection: a member of the synced group failed or left.
	if d.synced > 0 && !inRestart {
		if why, ignored := lostMember(pods, d.synced, expected); why != "" {
			d.deprecated = max(d.synced, maxEpoch-1)
			d.restartBegan, d.why, d.uncounted = true, why, ignored
			d.openReplicatedJobs = openBarriers(js, alive, d.synced)
			return d
		}
	}

	// The KEP's rule: epochs differ, deprecate all but the newest.
	if !allEqual && maxEpoch-1 > d.deprecated {
		d.deprecated = maxEpoch - 1
		if !inRestart && d.deprecated >= d.synced && d.synced > 0 {
			d.restartBegan, d.why = true, fmt.Sprintf("a Pod reported epoch %d while %d was synced", maxEpoch, d.synced)
		}
	}
	d.openReplicatedJobs = openBarriers(js, alive, d.synced)
	return d
}

// invalidAsSynced takes the Pods of a synced group whose epoch annotation
// is unusable (not a number, or beyond what an agent reports) as still at
// the synced epoch. Only an agent moves a Pod's epoch, and an agent reports
// syncedEpoch + 1 at most: anything else was written by something else
// that holds the Pod's token (its worker, say), and must not cost the
// JobSet a restart it did not need (InvalidEpoch says what was seen).
// The Pod's failure is still seen by its phase and containers.
func invalidAsSynced(pods []podGroup, synced int32) []podGroup {
	if !slices.ContainsFunc(pods, func(p podGroup) bool { return p.invalidEpoch != "" }) {
		return pods
	}
	out := slices.Clone(pods)
	for i := range out {
		if out[i].invalidEpoch != "" {
			out[i].epoch = synced
		}
	}
	return out
}

// lostMember says why the synced group can no longer run, or "": a
// worker's exit, an agent at a newer epoch, a Pod gone, a Pod missing, in
// that order. A Pod of the synced epoch that failed or is being deleted is
// lost only while the group is short of it: one that had reported the
// epoch and failed before the group synced was replaced (the sync counted
// only live Pods), and it is no member of the group.
//
// ignored reports that the loss is a Pod gone for a reason its Job's
// podFailurePolicy ignores.
func lostMember(pods []podGroup, synced int32, expected int) (why string, ignored bool) {
	atSynced := 0
	var gone, exited, moved *podGroup
	for i := range pods {
		p := &pods[i]
		switch {
		case p.finished && !p.gone:
			// Done, at this epoch or an earlier one: present.
			atSynced += p.n()
		case p.epoch == synced && p.gone:
			if gone == nil || (gone.ignored && !p.ignored) {
				gone = p
			}
		case p.epoch == synced && p.workerExited != "":
			if exited == nil {
				exited = p
			}
		case p.epoch > synced && !p.gone:
			if moved == nil {
				moved = p
			}
		case p.epoch == synced:
			atSynced += p.n()
		}
	}
	switch {
	case exited != nil:
		return fmt.Sprintf("container %s of Pod %s exited", exited.workerExited, exited.first()), false
	case moved != nil:
		return fmt.Sprintf("the agent of Pod %s moved to epoch %d", moved.first(), moved.epoch), false
	case atSynced < expected && gone != nil && gone.ignored:
		return fmt.Sprintf("Pod %s of epoch %d failed or is being deleted for a reason its Job's podFailurePolicy ignores", gone.first(), synced), true
	case atSynced < expected && gone != nil:
		return fmt.Sprintf("Pod %s of epoch %d failed or is being deleted", gone.first(), synced), false
	case atSynced < expected:
		return fmt.Sprintf("%d of %d Pods of epoch %d remain", atSynced, expected, synced), false
	}
	return "", false
}

// openBarriers returns the replicated jobs whose barriers may lift at the
// synced epoch: all of them (nil), or, under a startup order, those whose
// turn has come, on the first start and after every in-place restart
// alike. Every Job of an InPlaceRestart JobSet is created at once (every
// Pod must report an epoch before any barrier lifts), so the barriers are
// what keeps the order:
//
//   - startupPolicyOrder InOrder: each replicated job once every Pod of the
//     previous one is ready at the synced epoch;
//   - dependsOn: once every Pod of each dependency is ready (status Ready:
//     ready or finished) or finished (status Complete) at the synced epoch.
//     A dependency that must complete cannot run again in place: once it
//     finished, a restart recreates the Jobs (finishedMember), which runs
//     it again first.
func openBarriers(js *jobset.JobSet, alive []podGroup, synced int32) []string {
	inOrder := js.Spec.StartupPolicy != nil && js.Spec.StartupPolicy.StartupPolicyOrder == jobset.InOrder
	ordered := inOrder || slices.ContainsFunc(js.Spec.ReplicatedJobs, func(rj jobset.ReplicatedJob) bool { return len(rj.DependsOn) > 0 })
	if !ordered {
		return nil
	}
	ready, finished := map[string]int{}, map[string]int{}
	for _, p := range alive {
		switch {
		case p.finished:
			// Done at this epoch or an earlier one (a dependency that
			// completed before a suspension is not run again on resume).
			finished[p.replicatedJob] += p.n()
		case p.epoch != synced:
		case p.ready:
			ready[p.replicatedJob] += p.n()
		}
	}
	want := func(name string) int {
		for _, rj := range js.Spec.ReplicatedJobs {
			if rj.Name == name {
				return int(rj.Replicas) * int(podsPerJob(rj))
			}
		}
		return 0
	}
	open := []string{}
	for i, rj := range js.Spec.ReplicatedJobs {
		if inOrder && i > 0 {
			prev := js.Spec.ReplicatedJobs[i-1].Name
			if ready[prev]+finished[prev] < want(prev) {
				break
			}
		}
		met := true
		for _, d := range rj.DependsOn {
			switch d.Status {
			case jobset.DependencyComplete:
				met = met && finished[d.Name] >= want(d.Name)
			default:
				met = met && ready[d.Name]+finished[d.Name] >= want(d.Name)
			}
		}
		if met {
			open = append(open, rj.Name)
		}
	}
	return open
}

// inStepWithEpochs sets upstream JobSet's names for the epochs, which count
// from 0 where epochs count from 1 (0 meaning none): an agent written for
// upstream JobSet reads them from the JobSet's status.
func inStepWithEpochs(s *jobset.JobSetStatus) {
	attempt := func(epoch int32) *int32 {
		if epoch == 0 {
			return nil
		}
		return ptr.To(epoch - 1)
	}
	s.PreviousInPlaceRestartAttempt = attempt(s.DeprecatedEpoch)
	s.CurrentInPlaceRestartAttempt = attempt(s.SyncedEpoch)
}
