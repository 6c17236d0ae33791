package restartbench

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/inplace-dev/inplace/test/simnode"
	"github.com/inplace-dev/inplace/webhook/inject"
)

// containerStep is a container's state in one status write of a restart of
// all containers.
type containerStep int

const (
	// exited: terminated with the worker's exit code (1).
	exited containerStep = iota
	// restarting: waiting, its restart by the kubelet under way.
	restarting
	// initializing: waiting for the Pod's init containers (the agent's
	// startup probe: the barrier).
	initializing
	// running, not yet started (its startup probe has not passed).
	running
	// started: running, its startup probe passed.
	started
	// ready: started and ready.
	ready
)

// restartStep is one status write of a Pod whose containers the kubelet
// restarts all at once, after a worker's exit.
type restartStep struct {
	phase corev1.PodPhase
	// restartingAll: the Pod's AllContainersRestarting condition is True
	// (False after it was).
	restartingAll bool
	// restarted: the containers' restart counts and last states show the
	// restart.
	restarted     bool
	worker, agent containerStep
}

// kubeletRestart is the status writes a kubelet makes of a Pod that
// restarts all its containers after a worker's exit, measured on kubelet
// v1.36 with containerd (docs/development/README.md, "Calibrated against the real
// kubelet", 6.5 per Pod on real nodes where the kubelet also writes the
// containers' resources): the exit; every container restarting; Pending,
// the agent running; the agent started (its startup probe, the barrier,
// passed: the prober's own write); Running, the agent ready; the worker
// running and the Pod ready.
var kubeletRestart = []restartStep{
	{phase: corev1.PodRunning, restartingAll: true, worker: exited, agent: ready},
	{phase: corev1.PodRunning, restarted: true, worker: restarting, agent: restarting},
	{phase: corev1.PodPending, restarted: true, worker: initializing, agent: running},
	{phase: corev1.PodPending, restarted: true, worker: initializing, agent: started},
	{phase: corev1.PodRunning, restarted: true, worker: initializing, agent: ready},
	{phase: corev1.PodRunning, restarted: true, worker: ready, agent: ready},
}

// neededRestart is the status writes of its Pod a kubelet cannot do
// without in an in-place restart: its containers restarted and not ready,
// then running and ready.
var neededRestart = []restartStep{kubeletRestart[2], kubeletRestart[5]}

// statusWrites are the status writes of a floor's kind.
func statusWrites(kind string) ([]restartStep, error) {
	switch kind {
	case FloorNeeded:
		return neededRestart, nil
	case FloorKubelet:
		return kubeletRestart, nil
	}
	return nil, fmt.Errorf("unknown floor %q: use %s or %s", kind, FloorNeeded, FloorKubelet)
}

// floorUID stands for a Pod's UID in a restartPatch until forPod names it.
const floorUID types.UID = "00000000-0000-0000-0000-floor0000uid"

// restartPatch is one status write of a floor Pod, for any of the copies.
type restartPatch []byte

// forPod is the write of the Pod with that UID.
func (p restartPatch) forPod(uid types.UID) []byte {
	return bytes.ReplaceAll(p, []byte(floorUID), []byte(uid))
}

// restartPatches are the status writes, one per step, of a copy of sample
// (a Pod of the in-place JobSet, ready) restarting all its containers at
// the time at: each the strategic merge patch of the change from the
// status before it, as the kubelet's status manager sends it (a changed
// container list whole: the lists are atomic).
func restartPatches(sample *corev1.Pod, steps []restartStep, at time.Time) ([]restartPatch, error) {
	agent := slices.IndexFunc(sample.Spec.InitContainers, inject.RestartsPod)
	if agent < 0 {
		return nil, fmt.Errorf("pod %s has no agent: an init container that always restarts and restarts all containers on an exit code", sample.Name)
	}
	// The kubelet runs other init containers again too, with writes of
	// their own that kubeletRestart does not have.
	if len(sample.Spec.InitContainers) > 1 {
		return nil, fmt.Errorf("pod %s has init containers besides its agent: the floors imitate the writes of a Pod with the agent alone", sample.Name)
	}
	agentName := sample.Spec.InitContainers[agent].Name
	prev := sample.Status.DeepCopy()
	patches := make([]restartPatch, 0, len(steps))
	for _, step := range steps {
		next := restartStatus(&sample.Status, prev, agentName, step, metav1.NewTime(at))
		patch, err := simnode.StatusPatch(floorUID, prev, next)
		if err != nil {
			return nil, err
		}
		patches = append(patches, patch)
		prev = next
	}
	return patches, nil
}

// restartStatus is the status of a step: from before, the Pod's ready
// status before the restart; prev is the status written before it (the
// conditions keep their transition times from it).
func restartStatus(before, prev *corev1.PodStatus, agentName string, step restartStep, at metav1.Time) *corev1.PodStatus {
	s := before.DeepCopy()
	s.Phase = step.phase
	podReady := step.worker == ready && step.agent == ready
	setCondition(s, prev, corev1.PodReady, podReady, at)
	setCondition(s, prev, corev1.ContainersReady, podReady, at)
	if step.restartingAll || slices.ContainsFunc(prev.Conditions, func(c corev1.PodCondition) bool { return c.Type == simnode.ConditionAllContainersRestarting }) {
		setCondition(s, prev, simnode.ConditionAllContainersRestarting, step.restartingAll, at)
	}
	for i := range s.ContainerStatuses {
		setContainer(&s.ContainerStatuses[i], step.worker, step.restarted, at)
	}
	for i := range s.InitContainerStatuses {
		if s.InitContainerStatuses[i].Name == agentName {
			setContainer(&s.InitContainerStatuses[i], step.agent, step.restarted, at)
		}
	}
	return s
}

// setCondition sets a condition's status, with its transition time kept
// from prev when unchanged.
func setCondition(s, prev *corev1.PodStatus, t corev1.PodConditionType, status bool, at metav1.Time) {
	c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, LastTransitionTime: at}
	if status {
		c.Status = corev1.ConditionTrue
	}
	if i := slices.IndexFunc(prev.Conditions, func(p corev1.PodCondition) bool { return p.Type == t }); i >= 0 && prev.Conditions[i].Status == c.Status {
		c = prev.Conditions[i]
	}
	if i := slices.IndexFunc(s.Conditions, func(p corev1.PodCondition) bool { return p.Type == t }); i >= 0 {
		s.Conditions[i] = c
		return
	}
	s.Conditions = append(s.Conditions, c)
}

// setContainer sets a container's status to a step, from its status
// before the restart.
func setContainer(cs *corev1.ContainerStatus, step containerStep, restarted bool, at metav1.Time) {
	if restarted {
		cs.RestartCount++
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: simnode.ReasonRestartingAllContainers, Message: simnode.MessageRestartingAllContainers, StartedAt: at, FinishedAt: at,
		}}
	}
	cs.Ready, cs.Started = step == ready, new(step >= started)
	switch step {
	case exited:
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: at, FinishedAt: at}}
	case restarting:
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: simnode.ReasonRestartingAllContainers}}
	case initializing:
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	default:
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}
	}
}

// refusedForGood reports the errors that trying a write again will not
// mend: the floor fails on them instead of trying forever.
func refusedForGood(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) ||
		apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsBadRequest(err)
}
