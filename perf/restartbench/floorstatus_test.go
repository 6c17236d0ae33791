package restartbench

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/inplace-dev/inplace/agent"
	"github.com/inplace-dev/inplace/test/simnode"
)

// readyPod is a Pod of an in-place JobSet, its agent and worker ready, as
// the kubelet reports it.
func readyPod() *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	started := true
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	status := func(name string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Image: "registry.local/" + name + ":v1", ImageID: "sha256:" + name, ContainerID: "containerd://" + name,
			Ready: true, Started: &started, RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "train-workers-0-0-abcde", Namespace: "ns", UID: "11111111-2222-3333-4444-555555555555"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: "inplace-agent", RestartPolicy: &always, RestartPolicyRules: []corev1.ContainerRestartRule{{
					Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
					ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{88}},
				}}},
			},
			Containers: []corev1.Container{{Name: "worker"}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			// The conditions a simulated kubelet writes, the restart of all
			// containers' among them, False after an earlier restart.
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: simnode.ConditionAllContainersRestarting, Status: corev1.ConditionFalse, LastTransitionTime: at},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
			},
			InitContainerStatuses: []corev1.ContainerStatus{status("inplace-agent")},
			ContainerStatuses:     []corev1.ContainerStatus{status("worker")},
		},
	}
}

// observed is what a test reads of one status write's result: the
// Pod's phase, its Ready, ContainersReady and AllContainersRestarting
// conditions, and each container's state (its waiting reason, terminated
// exit code, or running), readiness, start and restart count.
type observed struct {
	phase                              corev1.PodPhase
	ready, containersReady, restartAll corev1.ConditionStatus
	worker, agent                      containerObserved
}

type containerObserved struct {
	state          string
	ready, started bool
	restarts       int32
}

func observe(pod *corev1.Pod) observed {
	cond := func(t corev1.PodConditionType) corev1.ConditionStatus {
		for _, c := range pod.Status.Conditions {
			if c.Type == t {
				return c.Status
			}
		}
		return ""
	}
	ctr := func(cs corev1.ContainerStatus) containerObserved {
		o := containerObserved{ready: cs.Ready, started: cs.Started != nil && *cs.Started, restarts: cs.RestartCount}
		switch st := cs.State; {
		case st.Waiting != nil:
			o.state = st.Waiting.Reason
		case st.Terminated != nil:
			o.state = fmt.Sprintf("exit %d", st.Terminated.ExitCode)
		case st.Running != nil:
			o.state = "running"
		}
		if cs.RestartCount > 2 && (cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 137 ||
			cs.LastTerminationState.Terminated.Reason != simnode.ReasonRestartingAllContainers) {
			o.state += ", no last state of the restart"
		}
		return o
	}
	return observed{phase: pod.Status.Phase, ready: cond(corev1.PodReady), containersReady: cond(corev1.ContainersReady),
		restartAll: cond(simnode.ConditionAllContainersRestarting),
		worker:     ctr(pod.Status.ContainerStatuses[0]), agent: ctr(pod.Status.InitContainerStatuses[0])}
}

// TestRestartPatches applies each floor's status writes in order, as the
// API server would, to a ready Pod, and reads after each what the
// kubelet's writes say (docs/development/README.md, "Calibrated against the real
// kubelet"): each write changes the Pod (a write that changes nothing
// costs the API server no etcd write, and would make the floor cheaper
// than the kubelet), and the Pod ends ready again, its containers
// restarted once, their images kept.
func TestRestartPatches(t *testing.T) {
	const (
		f = corev1.ConditionFalse
		T = corev1.ConditionTrue
	)
	running, restartingAll, initializing := "running", simnode.ReasonRestartingAllContainers, "PodInitializing"
	kubelet := []observed{
		// The exit.
		{corev1.PodRunning, f, f, T, containerObserved{"exit 1", false, false, 2}, containerObserved{running, true, true, 2}},
		// Every container restarting.
		{corev1.PodRunning, f, f, f, containerObserved{restartingAll, false, false, 3}, containerObserved{restartingAll, false, false, 3}},
		// Pending, the agent running.
		{corev1.PodPending, f, f, f, containerObserved{initializing, false, false, 3}, containerObserved{running, false, false, 3}},
		// The agent started: the barrier lifted.
		{corev1.PodPending, f, f, f, containerObserved{initializing, false, false, 3}, containerObserved{running, false, true, 3}},
		// Running, the agent ready.
		{corev1.PodRunning, f, f, f, containerObserved{initializing, false, false, 3}, containerObserved{running, true, true, 3}},
		// The worker running, the Pod ready.
		{corev1.PodRunning, T, T, f, containerObserved{running, true, true, 3}, containerObserved{running, true, true, 3}},
	}
	want := map[string][]observed{FloorKubelet: kubelet, FloorNeeded: {kubelet[2], kubelet[5]}}
	uid := types.UID("99999999-8888-7777-6666-555555555555")
	for _, kind := range FloorKinds {
		t.Run(kind, func(t *testing.T) {
			steps, err := statusWrites(kind)
			if err != nil {
				t.Fatal(err)
			}
			pod := readyPod()
			patches, err := restartPatches(pod, steps, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(patches) != len(want[kind]) {
				t.Fatalf("%d status writes, want %d", len(patches), len(want[kind]))
			}
			pod.UID = uid
			cur, err := json.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range patches {
				patch := p.forPod(uid)
				var meta struct {
					Metadata struct {
						UID types.UID `json:"uid"`
					} `json:"metadata"`
				}
				if err := json.Unmarshal(patch, &meta); err != nil || meta.Metadata.UID != uid {
					t.Fatalf("write %d: %s does not name the Pod's UID %s as its precondition (%v)", i+1, patch, uid, err)
				}
				next, err := strategicpatch.StrategicMergePatch(cur, patch, corev1.Pod{})
				if err != nil {
					t.Fatalf("write %d: %v", i+1, err)
				}
				var before, after corev1.Pod
				if err := json.Unmarshal(cur, &before); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(next, &after); err != nil {
					t.Fatal(err)
				}
				if equality.Semantic.DeepEqual(before.Status, after.Status) {
					t.Errorf("write %d (%s) changes nothing", i+1, patch)
				}
				if got := observe(&after); got != want[kind][i] {
					t.Errorf("after write %d: %+v, want %+v", i+1, got, want[kind][i])
				}
				if n := len(after.Status.Conditions); n != len(pod.Status.Conditions) {
					t.Errorf("after write %d: %d conditions, want the %d the Pod had", i+1, n, len(pod.Status.Conditions))
				}
				for _, cs := range append(after.Status.ContainerStatuses, after.Status.InitContainerStatuses...) {
					if cs.Image != "registry.local/"+cs.Name+":v1" {
						t.Errorf("after write %d: %s lost its image: %+v", i+1, cs.Name, cs)
					}
				}
				cur = next
			}
		})
	}
}

// TestRestartPatchesRefuseOtherPods: a Pod without an agent has no
// restart of all containers to imitate, and one with other init
// containers has writes of theirs that the floors do not make.
func TestRestartPatchesRefuseOtherPods(t *testing.T) {
	noAgent := readyPod()
	noAgent.Spec.InitContainers = nil
	setup := readyPod()
	setup.Spec.InitContainers = append([]corev1.Container{{Name: "setup"}}, setup.Spec.InitContainers...)
	for name, pod := range map[string]*corev1.Pod{"no agent": noAgent, "another init container": setup} {
		if _, err := restartPatches(pod, kubeletRestart, time.Now()); err == nil {
			t.Errorf("%s: restartPatches accepted the Pod", name)
		}
	}
}

// TestRefusedForGood: the floor stops on what the API server will not
// accept again, through the agent's wrapping too, and retries refusals.
func TestRefusedForGood(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, c := range []struct {
		err   error
		final bool
	}{
		{apierrors.NewForbidden(gr, "p", errors.New("policy")), true},
		{fmt.Errorf("%w: %w", agent.ErrReportRefused, apierrors.NewForbidden(gr, "p", errors.New("policy"))), true},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil), true},
		{apierrors.NewUnauthorized("token"), true},
		{apierrors.NewConflict(gr, "p", errors.New("uid")), true},
		{apierrors.NewTooManyRequests("later", 1), false},
		{fmt.Errorf("%w: %w", agent.ErrReportRefused, apierrors.NewTooManyRequests("later", 1)), false},
		{apierrors.NewServiceUnavailable("down"), false},
	} {
		if got := refusedForGood(c.err); got != c.final {
			t.Errorf("refusedForGood(%v) = %v, want %v", c.err, got, c.final)
		}
	}
}
