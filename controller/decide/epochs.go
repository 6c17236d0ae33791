package decide

import (
	"fmt"
	"slices"

	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/state"
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

// epochDecision is the outcome for the status and the broadcast.
type epochDecision struct {
	deprecated, synced int32
	// syncedPods is the size of the group at its last sync.
	syncedPods int32
	// syncs: every expected Pod reports one epoch newer than the synced
	// one, which becomes syncedEpoch.
	syncs bool
	// restartBegan: this decision starts a new in-place restart.
	restartBegan bool
	// scaleBegan: this decision starts an in-place restart of the group at
	// a new size (scaling.go), which does not count towards maxRestarts.
	scaleBegan bool
	// madeByEveryPod: the restart began was already made, by every Pod
	// (the sync below a restart that was never decided).
	madeByEveryPod bool
	// uncounted: the restart began for a loss the Job's podFailurePolicy
	// ignores, and does not count towards maxRestarts.
	uncounted bool
	// why the restart began, for the condition and the Event.
	why string
	// openReplicatedJobs may lift their barrier; nil means all.
	openReplicatedJobs []string
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
func decideEpochs(js *jobset.JobSet, pods []state.PodGroup) epochDecision {
	d := epochDecision{deprecated: js.Status.DeprecatedEpoch, synced: js.Status.SyncedEpoch, syncedPods: js.Status.SyncedPods}
	if slices.ContainsFunc(pods, func(p state.PodGroup) bool { return p.Fatal }) {
		// That Pod's Job is about to fail, and its Job controller to delete
		// the Job's other Pods: the failure policy decides, not an in-place
		// restart. Nothing changes until then.
		d.openReplicatedJobs = openBarriers(js, pods, d.synced)
		return d
	}
	// The group synced at d.synced and not restarting, suspended or
	// recreated since: Running, which an InPlaceRestart JobSet is only once
	// its Pods first synced. What it loses is a restart; before, and during
	// one, it only has yet to sync.
	groupSynced := jobset.RestartStateOf(js, &js.Status) == jobset.StateRunning
	expected := expectedPods(js)
	if groupSynced {
		pods = invalidAsSynced(pods, d.synced)
	}

	alive := make([]state.PodGroup, 0, len(pods))
	aliveN := 0
	maxEpoch, allEqual, allReported := int32(0), true, true
	for _, p := range pods {
		if p.Gone {
			continue
		}
		alive = append(alive, p)
		aliveN += p.N()
		if p.Finished && p.Epoch <= d.deprecated {
			// Done in an earlier epoch (a Job that completed before a
			// suspension, say, which a resume does not start again): a
			// member that reports no more, and holds no sync back.
			continue
		}
		if p.Epoch == 0 {
			allReported = false
			continue
		}
		if maxEpoch != 0 && p.Epoch != maxEpoch {
			allEqual = false
		}
		maxEpoch = max(maxEpoch, p.Epoch)
	}

	// Sync: every expected Pod at one epoch newer than the synced one.
	if aliveN == expected && allReported && allEqual && maxEpoch > d.synced && maxEpoch > d.deprecated {
		if groupSynced {
			// Every Pod restarted before a restart was decided (their
			// kubelets' restart rules, while the restart was held back
			// for a fatal exit, say): it was one, and counts as one.
			d.deprecated = maxEpoch - 1
			d.restartBegan, d.madeByEveryPod = true, true
			d.why = fmt.Sprintf("every Pod restarted to epoch %d while %d was synced", maxEpoch, d.synced)
		}
		d.synced, d.syncedPods, d.syncs = maxEpoch, int32(expected), true
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
	if groupSynced && d.syncedPods > 0 && int(d.syncedPods) != expected {
		d.deprecated = max(d.synced, maxEpoch-1)
		d.scaleBegan = true
		d.why = fmt.Sprintf("the group was scaled from %d to %d Pods", d.syncedPods, expected)
		d.openReplicatedJobs = openBarriers(js, alive, d.synced)
		return d
	}

	// Fast detection: a member of the synced group failed or left.
	if groupSynced {
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
		if groupSynced && d.deprecated >= d.synced {
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
func invalidAsSynced(pods []state.PodGroup, synced int32) []state.PodGroup {
	out, _ := asSynced(pods, synced, func(p state.PodGroup) bool { return p.InvalidEpoch != "" })
	return out
}

// unreportedAsSynced takes the Pods of a synced group whose agents have
// not reported to a leader that has just begun taking direct reports as
// still at the synced epoch, whatever their Pods carry (nothing, or an
// epoch an agent wrote there when it last fell back). Their agents report
// to the leader, not on their Pods: a new leader knows nothing of them
// until they say their state again, which its broadcast asks them to, and
// a group it has not heard from is not a group that lost its members. A
// Pod's failure is still seen by its phase, its containers and its
// deletion. It reports whether it took any.
func unreportedAsSynced(pods []state.PodGroup, synced int32) ([]state.PodGroup, bool) {
	return asSynced(pods, synced, func(p state.PodGroup) bool {
		return !p.Reported && p.Epoch < synced && p.InvalidEpoch == "" && !p.Finished
	})
}

// asSynced takes the groups that take says as at the synced epoch, and
// reports whether there were any; pods itself is left as it is.
func asSynced(pods []state.PodGroup, synced int32, take func(state.PodGroup) bool) ([]state.PodGroup, bool) {
	if !slices.ContainsFunc(pods, take) {
		return pods, false
	}
	out := slices.Clone(pods)
	for i := range out {
		if take(out[i]) {
			out[i].Epoch = synced
		}
	}
	return out, true
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
func lostMember(pods []state.PodGroup, synced int32, expected int) (why string, ignored bool) {
	atSynced := 0
	var gone, exited, moved *state.PodGroup
	for i := range pods {
		p := &pods[i]
		switch {
		case p.Finished && !p.Gone:
			// Done, at this epoch or an earlier one: present.
			atSynced += p.N()
		case p.Epoch == synced && p.Gone:
			if gone == nil || (gone.Ignored && !p.Ignored) {
				gone = p
			}
		case p.Epoch == synced && p.WorkerExited != "":
			if exited == nil {
				exited = p
			}
		case p.Epoch > synced && !p.Gone:
			if moved == nil {
				moved = p
			}
		case p.Epoch == synced:
			atSynced += p.N()
		}
	}
	switch {
	case exited != nil:
		return fmt.Sprintf("container %s of Pod %s exited", exited.WorkerExited, exited.First()), false
	case moved != nil:
		return fmt.Sprintf("the agent of Pod %s moved to epoch %d", moved.First(), moved.Epoch), false
	case atSynced < expected && gone != nil && gone.Ignored:
		return fmt.Sprintf("Pod %s of epoch %d failed or is being deleted for a reason its Job's podFailurePolicy ignores", gone.First(), synced), true
	case atSynced < expected && gone != nil:
		return fmt.Sprintf("Pod %s of epoch %d failed or is being deleted", gone.First(), synced), false
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
//     previous one is ready at the synced epoch (in process scope, its
//     supervisors' readiness probes passed at that epoch);
//   - dependsOn: once every Pod of each dependency is ready (status Ready:
//     ready or finished) or finished (status Complete) at the synced epoch.
//     A dependency that must complete cannot run again in place: once it
//     finished, a restart recreates the Jobs (finishedMember), which runs
//     it again first.
func openBarriers(js *jobset.JobSet, alive []state.PodGroup, synced int32) []string {
	if !jobset.StartsInOrder(js) {
		return nil
	}
	inOrder := js.Spec.StartupPolicy != nil && js.Spec.StartupPolicy.StartupPolicyOrder == jobset.InOrder
	// In process scope a Pod's Ready condition outlives the restart of its
	// workers: only the supervisors' verdict at the synced epoch counts.
	process := protocol.ProcessScope(js.Annotations)
	ready, finished := map[string]int{}, map[string]int{}
	for _, p := range alive {
		switch {
		case p.Finished:
			// Done at this epoch or an earlier one (a dependency that
			// completed before a suspension is not run again on resume).
			finished[p.ReplicatedJob] += p.N()
		case p.Epoch != synced:
		case process && p.ReadyEpoch != synced:
		case p.Ready:
			ready[p.ReplicatedJob] += p.N()
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

// inStepWithEpochs sets upstream JobSet's names for the epochs, its
// attempts (protocol.Epoch.Attempt): an agent written for upstream JobSet
// reads them from the JobSet's status.
func inStepWithEpochs(s *jobset.JobSetStatus) {
	s.PreviousInPlaceRestartAttempt = protocol.Epoch(s.DeprecatedEpoch).Attempt()
	s.CurrentInPlaceRestartAttempt = protocol.Epoch(s.SyncedEpoch).Attempt()
}
