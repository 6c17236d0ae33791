package state

import (
	"fmt"
	"iter"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/podfailure"
)

// This file observes what the epoch protocol needs of one Pod (PodEpoch):
// the epoch its agent reported, whether it is gone, finished or ready,
// whether a worker exited, whether its agent crash-loops, and which of its
// containers waits for an image the kubelet cannot pull; then, given
// the JobSet, the epoch bounded by its status (boundEpoch) and the Pod
// judged by its Job's podFailurePolicy (judgePod). The family records every
// Pod this way (podClassOf, PodGroups), and the Pods' event handler compares
// two observations (podSignal).

// PodEpoch is what the epoch decision needs of one Pod.
type PodEpoch struct {
	Name          string
	ReplicatedJob string
	// Epoch reported by the Pod's agent; 0 before it reported.
	Epoch int32
	// Gone: the Pod failed or is being deleted.
	Gone bool
	// Fatal: the Pod failed with an exit code its Job's podFailurePolicy
	// turns into a Job failure; the failure policy, not an in-place
	// restart, decides what follows.
	Fatal bool
	// Ignored: the Pod failed or is being deleted for a reason its Job's
	// podFailurePolicy ignores (action Ignore, say on DisruptionTarget):
	// the group restarts without it, and the restart does not count
	// towards maxRestarts, as the Job does not count the Pod's failure
	// towards its backoffLimit.
	Ignored bool
	// WorkerExited names a worker container that terminated, or whose
	// worker exited in process scope at the Pod's epoch, if any.
	WorkerExited string
	// Finished: the Pod succeeded, its workers done. It cannot restart in
	// place: its agent is gone with it.
	Finished bool
	Ready    bool
	// ReadyEpoch is the epoch at which the Pod's supervised workers last
	// passed their readiness probes (process scope, ordered barriers); 0
	// if none.
	ReadyEpoch int32
	// InvalidEpoch is an epoch annotation the controller cannot use (the
	// Pod then counts as not reported): not a positive number, or, once
	// the JobSet is known (boundEpoch), beyond syncedEpoch + 1.
	InvalidEpoch string
	// InvalidWhy says why InvalidEpoch cannot be used.
	InvalidWhy string
	// Reported: the Pod's agent reported to this leader directly
	// (protocol.ReportedMark on the controller's copy).
	Reported bool
	// EpochKey is the annotation the epoch was read from: jobset.EpochKey, or
	// upstream JobSet's InPlaceRestartAttemptKey.
	EpochKey string
	// RawEpoch is the annotation's value as written.
	RawEpoch string
	// AgentRestarts counts the restarts of the Pod's agent container.
	AgentRestarts int32
	// AgentCrashLooping: the agent waits in CrashLoopBackOff while a worker
	// of its Pod runs. It cannot see a deprecated epoch, so its Pod cannot
	// restart in place.
	AgentCrashLooping bool
	// ImagePull is the container that waits for an image the kubelet
	// cannot pull, if any.
	ImagePull ImagePull
}

// ImagePull is a container of a Pod that waits for an image the kubelet
// cannot pull (imagePullWait); the zero value is none. It holds what the
// Pods of one replicated job share, so that they stay in one class (the
// kubelet's message, which may differ from Pod to Pod, is read from one
// Pod of the class: PodGroup.ImagePullMessage).
type ImagePull struct {
	// Container names the container; Agent says whether it is the Pod's
	// agent.
	Container string
	Agent     bool
	// Image is the image it waits for.
	Image string
	// Reason is the kubelet's: ErrImagePull, ImagePullBackOff,
	// ErrImageNeverPull, InvalidImageName or ImageInspectError.
	Reason string
	// ServiceAccount is the Pod's, whose imagePullSecrets the Pod was given
	// when it was created.
	ServiceAccount string
}

// The kubelet's reasons for a container waiting on its image
// (pkg/kubelet/images). Named without a Reason prefix: they are the
// kubelet's, not reasons this project sets.
const (
	errImagePull      = "ErrImagePull"
	imagePullBackOff  = "ImagePullBackOff"
	errImageNeverPull = "ErrImageNeverPull"
	invalidImageName  = "InvalidImageName"
	imageInspectError = "ImageInspectError"
)

// imagePullWait reports whether a container waiting for reason waits on
// an image it cannot have.
func imagePullWait(reason string) bool {
	switch reason {
	case errImagePull, imagePullBackOff, errImageNeverPull, invalidImageName, imageInspectError:
		return true
	}
	return false
}

// Retried reports whether the kubelet's next attempt may succeed by
// itself: not for an image it must not pull (imagePullPolicy Never and the
// image absent from the node) or whose name does not parse.
func (i ImagePull) Retried() bool {
	return i.Reason != errImageNeverPull && i.Reason != invalidImageName
}

// NeverPulled reports whether the kubelet does not pull the image at all:
// imagePullPolicy Never, and the image is not on the node.
func (i ImagePull) NeverPulled() bool { return i.Reason == errImageNeverPull }

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
//
// A worker's exit its agent reported (process scope: WorkerExitAnnotation,
// at the Pod's epoch) is judged as a terminated container with its code:
// the agent says it before the kubelet's next relist does. byStatus says
// whether the Pod is fatal by what the kubelet reported alone.
func judgePod(pfp *batchv1.PodFailurePolicy, pod *corev1.Pod, gone bool) (fatal, ignored, byStatus bool) {
	fatal, ignored = judgeStatus(pfp, pod, gone)
	if fatal || pod.Status.Phase == corev1.PodFailed {
		return fatal, ignored, fatal
	}
	e, err := protocol.ParseWorkerExit(pod.Annotations[protocol.WorkerExitAnnotation])
	epoch, eerr := protocol.ParseEpoch(pod.Annotations[jobset.EpochKey])
	if err != nil || eerr != nil || protocol.Epoch(e.Epoch) != epoch {
		return fatal, ignored, false
	}
	reported := &corev1.Pod{Status: corev1.PodStatus{Conditions: pod.Status.Conditions, ContainerStatuses: []corev1.ContainerStatus{{
		Name: e.Container, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(e.Code), Reason: "Error"}},
	}}}}
	action, matched := podfailure.MatchPod(pfp, reported)
	return matched && action == batchv1.PodFailurePolicyActionFailJob, ignored, false
}

// judgeStatus is judgePod by the Pod's status alone.
func judgeStatus(pfp *batchv1.PodFailurePolicy, pod *corev1.Pod, gone bool) (fatal, ignored bool) {
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
func boundEpoch(js *jobset.JobSet, p PodEpoch) PodEpoch {
	if bound := int64(js.Status.SyncedEpoch) + 1; int64(p.Epoch) > bound {
		p.InvalidEpoch = p.RawEpoch
		p.InvalidWhy = fmt.Sprintf("which is beyond syncedEpoch + 1 (%d), the most an agent reports", bound)
		if p.EpochKey == jobset.InPlaceRestartAttemptKey {
			// bound fits an epoch: an epoch beyond it was read.
			p.InvalidWhy = fmt.Sprintf("which is beyond currentInPlaceRestartAttempt + 1 (%s), the most an agent reports", protocol.Epoch(bound).AttemptString())
		}
		p.Epoch = 0
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

// ObservePod extracts the epoch facts of a Pod.
func ObservePod(pod *corev1.Pod) PodEpoch {
	p := PodEpoch{
		Name:          pod.Name,
		ReplicatedJob: pod.Labels[jobset.ReplicatedJobNameKey],
		Gone:          pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed,
		Finished:      pod.Status.Phase == corev1.PodSucceeded,
	}
	_, p.Reported = pod.Annotations[protocol.ReportedMark]
	if raw, ok := pod.Annotations[jobset.EpochKey]; ok {
		p.EpochKey, p.RawEpoch = jobset.EpochKey, raw
		if v, err := protocol.ParseEpoch(raw); err == nil && v > 0 {
			p.Epoch = int32(v)
		} else {
			p.InvalidEpoch, p.InvalidWhy = raw, "which is not a positive number"
		}
	} else if raw, ok := pod.Annotations[jobset.InPlaceRestartAttemptKey]; ok {
		// An agent written for upstream JobSet: its attempts count from 0.
		p.EpochKey, p.RawEpoch = jobset.InPlaceRestartAttemptKey, raw
		if v, err := protocol.ParseAttempt(raw); err == nil {
			p.Epoch = int32(v)
		} else {
			p.InvalidEpoch, p.InvalidWhy = raw, "which is not a non-negative number"
		}
	}
	// In process scope a worker exits without its container: the agent
	// writes the exit on the Pod, for as long as the Pod stays at the epoch
	// the worker ran at.
	if raw, ok := pod.Annotations[protocol.WorkerExitAnnotation]; ok && p.Epoch > 0 {
		if e, err := protocol.ParseWorkerExit(raw); err == nil && e.Epoch == p.Epoch {
			p.WorkerExited = e.Container
		}
	}
	if raw, ok := pod.Annotations[protocol.ReadyEpochAnnotation]; ok {
		if e, err := protocol.ParseEpoch(raw); err == nil {
			p.ReadyEpoch = int32(e)
		}
	}
	agent := agentContainerName(pod)
	if agent != "" {
		for _, s := range pod.Status.InitContainerStatuses {
			if s.Name == agent {
				p.AgentRestarts = s.RestartCount
				// The workers are looked at only for an agent in back-off:
				// this runs on every event of every Pod.
				p.AgentCrashLooping = s.State.Waiting != nil && s.State.Waiting.Reason == crashLoopBackOff &&
					slices.ContainsFunc(pod.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.State.Running != nil })
			}
		}
	} else if agent = mainContainerAgent(pod); agent != "" {
		// Upstream's agent in main-container mode runs the workers as
		// its children: its container's restarts are the agent's, and
		// bound the first sync as a sidecar's do (its workers do not run
		// while it waits in back-off). agent stays "" for imagePullOf:
		// the workers wait behind no sidecar.
		// Only until the Pod reports an attempt: each in-place restart
		// restarts this container too, and a Pod that reported is past
		// the wait the guard bounds.
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == agent && p.Epoch == 0 {
				p.AgentRestarts = s.RestartCount
			}
		}
		agent = ""
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Terminated != nil && s.State.Terminated.ExitCode != 0 {
			p.WorkerExited = s.Name
		}
	}
	p.ImagePull = imagePullOf(pod, agent)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			p.Ready = true
		}
	}
	return p
}

// agentContainerName is the name of the Pod's agent: the sidecar whose
// environment carries the restart exit code (the webhook injects it under
// a name the configuration may change), or upstream JobSet's agent.
func agentContainerName(pod *corev1.Pod) string {
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		names := envNames(c.Env)
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

// envNames yields the names of env's variables, copying no container:
// the controller asks it of every Pod it reads.
func envNames(env []corev1.EnvVar) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, e := range env {
			if !yield(e.Name) {
				return
			}
		}
	}
}

// mainContainerAgent is the name of the regular container that runs
// upstream JobSet's agent in main-container mode (WORKER_COMMAND in its
// environment), or "".
func mainContainerAgent(pod *corev1.Pod) string {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if protocol.IsUpstreamAgent(c.Name, envNames(c.Env)) && slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == protocol.UpstreamEnvWorkerCommand }) {
			return c.Name
		}
	}
	return ""
}

// imagePullOf returns the container of pod that waits for an image the
// kubelet cannot pull: its agent first, as every regular container waits
// behind it, then the first other one, init containers before regular
// ones, in the order of their statuses.
func imagePullOf(pod *corev1.Pod, agent string) ImagePull {
	var found ImagePull
	take := func(s *corev1.ContainerStatus, isAgent bool) {
		if s.State.Waiting == nil || !imagePullWait(s.State.Waiting.Reason) || (found.Reason != "" && !isAgent) {
			return
		}
		found = ImagePull{Container: s.Name, Agent: isAgent, Image: imageOf(pod, s), Reason: s.State.Waiting.Reason, ServiceAccount: pod.Spec.ServiceAccountName}
		if found.ServiceAccount == "" {
			found.ServiceAccount = "default"
		}
	}
	for i := range pod.Status.InitContainerStatuses {
		s := &pod.Status.InitContainerStatuses[i]
		take(s, agent != "" && s.Name == agent)
		if found.Agent {
			return found
		}
	}
	for i := range pod.Status.ContainerStatuses {
		take(&pod.Status.ContainerStatuses[i], false)
	}
	return found
}

// imageOf is the image a container's status names, or its spec's: the
// kubelet names it in the status of a container that waits for it.
func imageOf(pod *corev1.Pod, s *corev1.ContainerStatus) string {
	if s.Image != "" {
		return s.Image
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.Name == s.Name {
				return c.Image
			}
		}
	}
	return ""
}

// imagePullMessage is the kubelet's message on the container of pod that
// waits for its image, "" if none does.
func imagePullMessage(pod *corev1.Pod, container string) string {
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range statuses {
			if s.Name == container && s.State.Waiting != nil {
				return s.State.Waiting.Message
			}
		}
	}
	return ""
}
