package restartbench

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
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
				{Name: "setup"},
				{Name: "inplace-agent", RestartPolicy: &always, RestartPolicyRules: []corev1.ContainerRestartRule{{
					Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
					ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{88}},
				}}},
			},
			Containers: []corev1.Container{{Name: "worker"}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
			},
			InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "setup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
				status("inplace-agent"),
			},
			ContainerStatuses: []corev1.ContainerStatus{status("worker")},
		},
	}
}

// TestRestartPatches applies each floor's status writes in order, as the
// API server would, to a ready Pod: each must change the Pod (a write
// that changes nothing costs the API server no etcd write, and would make
// the floor cheaper than the kubelet), keep what the kubelet keeps (image,
// container IDs, the other init containers), and leave the Pod ready
// again, its containers restarted once.
func TestRestartPatches(t *testing.T) {
	uid := types.UID("99999999-8888-7777-6666-555555555555")
	for _, kind := range []string{FloorNeeded, FloorKubelet} {
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
			if want := map[string]int{FloorNeeded: 2, FloorKubelet: 6}[kind]; len(patches) != want {
				t.Fatalf("%d status writes, want %d", len(patches), want)
			}
			pod.UID = uid
			cur, err := json.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			var phases []corev1.PodPhase
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
				phases = append(phases, after.Status.Phase)
				cur = next
			}
			var final corev1.Pod
			if err := json.Unmarshal(cur, &final); err != nil {
				t.Fatal(err)
			}
			want := readyPod().Status
			for _, cs := range append(final.Status.ContainerStatuses, final.Status.InitContainerStatuses...) {
				if cs.Name == "setup" {
					if cs.State.Terminated == nil || cs.RestartCount != 0 {
						t.Errorf("the init container that is not the agent was changed: %+v", cs)
					}
					continue
				}
				if cs.State.Running == nil || !cs.Ready || cs.RestartCount != 3 || cs.LastTerminationState.Terminated == nil ||
					cs.Image != "registry.local/"+cs.Name+":v1" || cs.ContainerID != "containerd://"+cs.Name {
					t.Errorf("%s after the restart: %+v, want running, ready, restarted once, its image and ID kept", cs.Name, cs)
				}
			}
			for _, c := range final.Status.Conditions {
				if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && c.Status != corev1.ConditionTrue {
					t.Errorf("condition %s %s after the restart", c.Type, c.Status)
				}
			}
			if final.Status.Phase != corev1.PodRunning || len(final.Status.InitContainerStatuses) != len(want.InitContainerStatuses) {
				t.Errorf("after the restart: phase %s, %d init container statuses", final.Status.Phase, len(final.Status.InitContainerStatuses))
			}
			if kind == FloorKubelet && phases[2] != corev1.PodPending {
				t.Errorf("phases %v: want Pending while the agent starts again", phases)
			}
		})
	}
}

// TestRestartPatchesNeedAnAgent: a Pod without an agent has no restart of
// all containers to imitate.
func TestRestartPatchesNeedAnAgent(t *testing.T) {
	pod := readyPod()
	pod.Spec.InitContainers = pod.Spec.InitContainers[:1]
	if _, err := restartPatches(pod, kubeletRestart, time.Now()); err == nil {
		t.Error("restartPatches accepted a Pod without an agent")
	}
}
