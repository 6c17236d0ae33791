package simnode

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/inplace-dev/inplace/api/protocol"
)

// Conditions and reasons the real kubelet reports around an in-place
// restart of every container (RestartAllContainers).
const (
	ConditionAllContainersRestarting corev1.PodConditionType = "AllContainersRestarting"

	ReasonRestartingAllContainers  = protocol.ReasonRestartingAllContainers
	MessageRestartingAllContainers = "The container is removed because RestartAllContainers in place"
)

// status is the simulated kubelet's model of a Pod's status.
type status struct {
	ip        string
	start     metav1.Time
	phase     corev1.PodPhase
	initOrder []string
	mainOrder []string
	byName    map[string]*corev1.ContainerStatus
	// sandboxReady: the Pod's sandbox runs (PodReadyToStartContainers).
	sandboxReady bool
	// restartingAll: every container is being restarted in place
	// (AllContainersRestarting); reported only for Pods with a rule that
	// can do it, as the kubelet does.
	restartingAll, canRestartAll bool
	// initialized stays true once the Pod was initialized, as the
	// kubelet's Initialized condition does through in-place restarts.
	initialized *bool
}

func newStatus(pod *corev1.Pod, ip string, restarts map[string]int32, lastTerm map[string]corev1.ContainerState, initialized *bool) *status {
	s := &status{ip: ip, start: metav1.Now(), phase: corev1.PodPending, byName: map[string]*corev1.ContainerStatus{},
		sandboxReady: true, canRestartAll: restartsAll(pod.Spec), initialized: initialized}
	if pod.Status.StartTime != nil {
		s.start = *pod.Status.StartTime
	}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	add := func(c corev1.Container) {
		cs := &corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, State: waiting, RestartCount: restarts[c.Name]}
		// Keep what the previous incarnation ended with, as the kubelet does.
		if t, ok := lastTerm[c.Name]; ok {
			cs.LastTerminationState = t
		}
		s.byName[c.Name] = cs
	}
	for _, c := range pod.Spec.InitContainers {
		s.initOrder = append(s.initOrder, c.Name)
		add(c)
	}
	for _, c := range pod.Spec.Containers {
		s.mainOrder = append(s.mainOrder, c.Name)
		add(c)
	}
	return s
}

func running() corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
}

func terminated(code int32, reason string) corev1.ContainerState {
	now := metav1.Now()
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: now, FinishedAt: now}}
}

func (s *status) set(name string, state corev1.ContainerState) {
	if cs := s.byName[name]; cs != nil {
		cs.State = state
		cs.Ready = state.Running != nil
		cs.Started = ptr.To(state.Running != nil)
	}
}

func (s *status) setInit(name string, state corev1.ContainerState) { s.set(name, state) }
func (s *status) setMain(name string, state corev1.ContainerState) { s.set(name, state) }

// setProbing marks a sidecar running whose startup probe has not passed:
// neither started nor ready.
func (s *status) setProbing(name string) {
	if cs := s.byName[name]; cs != nil {
		cs.State = running()
		cs.Started, cs.Ready = ptr.To(false), false
	}
}

// setStarted marks a sidecar whose startup probe passed; the kubelet
// reports it ready in a later write.
func (s *status) setStarted(name string) {
	if cs := s.byName[name]; cs != nil {
		cs.Started = ptr.To(true)
	}
}

// setReady marks a started sidecar ready (it has no readiness probe).
func (s *status) setReady(name string) {
	if cs := s.byName[name]; cs != nil {
		cs.Ready = true
	}
}

// restartAll reports every container removed for an in-place restart of
// them all, as the kubelet does: waiting, its restart count up by one, and
// its last state overwritten by the removal (exit code 137), whatever it
// ended with.
func (s *status) restartAll(restarts map[string]int32, lastTerm map[string]corev1.ContainerState) {
	now := metav1.Now()
	for name, cs := range s.byName {
		restarts[name]++
		cs.RestartCount = restarts[name]
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: ReasonRestartingAllContainers, Message: MessageRestartingAllContainers, StartedAt: now, FinishedAt: now,
		}}
		lastTerm[name] = cs.LastTerminationState
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonRestartingAllContainers}}
		cs.Ready, cs.Started = false, ptr.To(false)
	}
}

// restartsAll reports whether a container of spec has a rule that restarts
// every container in place.
func restartsAll(spec corev1.PodSpec) bool {
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, r := range c.RestartPolicyRules {
			if r.Action == corev1.ContainerRestartRuleActionRestartAllContainers {
				return true
			}
		}
	}
	return false
}

// restarted restarts one container.
func (s *status) restarted(name string, count int32, _ bool) {
	if cs := s.byName[name]; cs != nil {
		if cs.State.Terminated != nil {
			cs.LastTerminationState = cs.State
		}
		cs.RestartCount = count
		cs.State = running()
		cs.Ready, cs.Started = true, ptr.To(true)
	}
}

func (s *status) running() { s.phase = corev1.PodRunning }

// mainTerminated reports whether every main container has terminated.
func (s *status) mainTerminated() bool {
	for _, n := range s.mainOrder {
		if s.byName[n].State.Terminated == nil {
			return false
		}
	}
	return true
}

// anyRunning reports whether any of the named containers runs.
func (s *status) anyRunning(names []string) bool {
	for _, n := range names {
		if cs := s.byName[n]; cs != nil && cs.State.Running != nil {
			return true
		}
	}
	return false
}

// stopSidecars marks every running init container (a sidecar) stopped, as
// the kubelet stops them with SIGTERM once the main containers are done.
func (s *status) stopSidecars(names []string) {
	for _, n := range names {
		if cs := s.byName[n]; cs != nil && cs.State.Running != nil {
			s.set(n, terminated(0, "Completed"))
		}
	}
}

// finish sets the terminal phase once every main container has terminated
// for good.
func (s *status) finish() {
	failed := false
	for _, n := range s.mainOrder {
		t := s.byName[n].State.Terminated
		if t == nil {
			return
		}
		failed = failed || t.ExitCode != 0
	}
	s.phase = corev1.PodSucceeded
	if failed {
		s.phase = corev1.PodFailed
	}
}

func (s *status) terminal() bool {
	return s.phase == corev1.PodSucceeded || s.phase == corev1.PodFailed
}

func (s *status) build(pod *corev1.Pod) corev1.PodStatus {
	out := corev1.PodStatus{
		Phase: s.phase, HostIP: "127.0.0.1", PodIP: s.ip, StartTime: &s.start,
		HostIPs: []corev1.HostIP{{IP: "127.0.0.1"}}, PodIPs: []corev1.PodIP{{IP: s.ip}},
	}
	initialized, ready := true, s.phase == corev1.PodRunning
	for _, n := range s.initOrder {
		cs := *s.byName[n]
		out.InitContainerStatuses = append(out.InitContainerStatuses, cs)
		sidecarUp := cs.State.Running != nil && ptr.Deref(cs.Started, false)
		completed := cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		initialized = initialized && (sidecarUp || completed)
		// A sidecar counts for ContainersReady, as the kubelet counts it.
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			ready = ready && cs.Ready
		}
	}
	if s.initialized != nil {
		*s.initialized = *s.initialized || initialized
		initialized = *s.initialized
	}
	for _, n := range s.mainOrder {
		cs := *s.byName[n]
		out.ContainerStatuses = append(out.ContainerStatuses, cs)
		ready = ready && cs.State.Running != nil && cs.Ready
	}
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}
		if ok {
			c.Status = corev1.ConditionTrue
		}
		for _, prev := range pod.Status.Conditions {
			if prev.Type == t && prev.Status == c.Status {
				c.LastTransitionTime = prev.LastTransitionTime
			}
		}
		return c
	}
	out.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, s.sandboxReady),
		cond(corev1.PodScheduled, true),
		cond(corev1.PodInitialized, initialized),
		cond(corev1.ContainersReady, ready),
		cond(corev1.PodReady, ready),
	}
	if s.canRestartAll {
		out.Conditions = append(out.Conditions, cond(ConditionAllContainersRestarting, s.restartingAll))
	}
	return out
}
