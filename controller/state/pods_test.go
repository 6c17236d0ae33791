package state

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

func TestObservePod(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{jobset.ReplicatedJobNameKey: "workers"},
			Annotations: map[string]string{jobset.EpochKey: "4"}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "trainer", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}},
			},
		},
	}
	got := ObservePod(pod)
	want := PodEpoch{Name: "p", ReplicatedJob: "workers", Epoch: 4, EpochKey: jobset.EpochKey, RawEpoch: "4", WorkerExited: "trainer", Ready: true}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(PodEpoch{})); diff != "" {
		t.Errorf("observePod (-want +got):\n%s", diff)
	}
}

// An agent written for upstream JobSet reports its attempt, counted from 0,
// on upstream's annotation; ours wins when a Pod carries both.
func TestObservePodUpstreamAttempt(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		epoch       int32
		invalid     string
	}{
		{map[string]string{jobset.InPlaceRestartAttemptKey: "0"}, 1, ""},
		{map[string]string{jobset.InPlaceRestartAttemptKey: "3"}, 4, ""},
		{map[string]string{jobset.InPlaceRestartAttemptKey: "-1"}, 0, "-1"},
		{map[string]string{jobset.InPlaceRestartAttemptKey: "2147483647"}, 0, "2147483647"},
		{map[string]string{jobset.InPlaceRestartAttemptKey: "3", jobset.EpochKey: "2"}, 2, ""},
	} {
		got := ObservePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: tc.annotations}})
		if got.Epoch != tc.epoch || got.InvalidEpoch != tc.invalid {
			t.Errorf("%v: epoch %d invalid %q, want %d %q", tc.annotations, got.Epoch, got.InvalidEpoch, tc.epoch, tc.invalid)
		}
	}
}

// The restarts of an agent count, whether ours or upstream's as a sidecar
// (init containers) or upstream's in main-container mode (the regular
// container that runs WORKER_COMMAND); a container like it without
// WORKER_COMMAND, or a user's container, is not an agent.
func TestObservePodAgentRestarts(t *testing.T) {
	env := func(names ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for _, n := range names {
			out = append(out, corev1.EnvVar{Name: n, Value: "x"})
		}
		return out
	}
	upstream := env(protocol.EnvJobSetName, protocol.EnvPodName, protocol.UpstreamEnvWorkerCommand)
	for name, tc := range map[string]struct {
		init, regular []corev1.Container
		attempt       string
		want          int32
	}{
		"ours, a sidecar":                 {init: []corev1.Container{{Name: "inplace-agent", Env: env(protocol.EnvRestartExitCode)}}, want: 3},
		"upstream's, a sidecar":           {init: []corev1.Container{{Name: protocol.UpstreamAgentName, Env: env(protocol.EnvJobSetName, protocol.EnvPodName)}}, want: 3},
		"upstream's, main-container mode": {regular: []corev1.Container{{Name: "trainer", Env: upstream}}, want: 5},
		"upstream's variables, no WORKER_COMMAND, in a regular container": {regular: []corev1.Container{{Name: "trainer", Env: env(protocol.EnvJobSetName, protocol.EnvPodName, protocol.UpstreamEnvExitCode)}}, want: 0},
		"a user's container": {regular: []corev1.Container{{Name: "trainer", Env: env("WORKER_COMMAND")}}, want: 0},
		// Its in-place restarts restart the container too.
		"upstream's, main-container mode, once the Pod reported": {regular: []corev1.Container{{Name: "trainer", Env: upstream}}, attempt: "2", want: 0},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{InitContainers: tc.init, Containers: tc.regular}}
			if tc.attempt != "" {
				pod.Annotations = map[string]string{jobset.InPlaceRestartAttemptKey: tc.attempt}
			}
			for _, c := range tc.init {
				pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, RestartCount: 3})
			}
			for _, c := range tc.regular {
				pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, RestartCount: 5})
			}
			if got := ObservePod(pod).AgentRestarts; got != tc.want {
				t.Errorf("AgentRestarts %d, want %d", got, tc.want)
			}
		})
	}
}

// In process scope the agent writes a worker's exit on the Pod: it counts
// while the Pod is at the epoch the worker ran at, and not once the Pod has
// moved on.
func TestObservePodWorkerExitInProcessScope(t *testing.T) {
	for _, tc := range []struct {
		epoch, exit string
		want        string
	}{
		{"4", "4:trainer:1", "trainer"},
		{"5", "4:trainer:1", ""},
		{"4", "not-an-exit", ""},
		{"", "4:trainer:1", ""},
	} {
		annotations := map[string]string{protocol.WorkerExitAnnotation: tc.exit}
		if tc.epoch != "" {
			annotations[jobset.EpochKey] = tc.epoch
		}
		got := ObservePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: annotations}})
		if got.WorkerExited != tc.want {
			t.Errorf("epoch %q, worker exit %q: WorkerExited %q, want %q", tc.epoch, tc.exit, got.WorkerExited, tc.want)
		}
	}
}

// A container waiting for an image the kubelet cannot pull: the agent is
// named before any other container, which waits behind it; the image is
// the status's, or the spec's when the status has none.
func TestObservePodImagePull(t *testing.T) {
	agent := corev1.Container{Name: "inplace-agent", Image: "registry.example/agent:1", Env: []corev1.EnvVar{{Name: protocol.EnvRestartExitCode, Value: "88"}}}
	waiting := func(name, image, reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Image: image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "the kubelet's words"}}}
	}
	running := func(name string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	}
	cases := map[string]struct {
		serviceAccount string
		init, regular  []corev1.ContainerStatus
		want           ImagePull
	}{
		"every container runs": {
			init: []corev1.ContainerStatus{running("inplace-agent")}, regular: []corev1.ContainerStatus{running("trainer")},
		},
		"the agent backs off": {
			init: []corev1.ContainerStatus{waiting("inplace-agent", "registry.example/agent:1", "ImagePullBackOff")},
			want: ImagePull{Container: "inplace-agent", Agent: true, Image: "registry.example/agent:1", Reason: "ImagePullBackOff", ServiceAccount: "default"},
		},
		"the agent's image is never pulled, its status names no image: the spec's": {
			serviceAccount: "train",
			init:           []corev1.ContainerStatus{waiting("inplace-agent", "", "ErrImageNeverPull")},
			want:           ImagePull{Container: "inplace-agent", Agent: true, Image: "registry.example/agent:1", Reason: "ErrImageNeverPull", ServiceAccount: "train"},
		},
		"a worker cannot pull": {
			init: []corev1.ContainerStatus{running("inplace-agent")}, regular: []corev1.ContainerStatus{running("sidecar"), waiting("trainer", "registry.example/trainer:1", "ErrImagePull")},
			want: ImagePull{Container: "trainer", Image: "registry.example/trainer:1", Reason: "ErrImagePull", ServiceAccount: "default"},
		},
		"an init container of the user's and the agent wait: the agent": {
			init: []corev1.ContainerStatus{waiting("setup", "registry.example/setup:1", "InvalidImageName"), waiting("inplace-agent", "registry.example/agent:1", "ErrImagePull")},
			want: ImagePull{Container: "inplace-agent", Agent: true, Image: "registry.example/agent:1", Reason: "ErrImagePull", ServiceAccount: "default"},
		},
		"another wait is no image pull": {
			init: []corev1.ContainerStatus{running("inplace-agent")}, regular: []corev1.ContainerStatus{waiting("trainer", "registry.example/trainer:1", "CreateContainerConfigError")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p"},
				Spec:       corev1.PodSpec{ServiceAccountName: tc.serviceAccount, InitContainers: []corev1.Container{{Name: "setup"}, agent}, Containers: []corev1.Container{{Name: "trainer"}}},
				Status:     corev1.PodStatus{InitContainerStatuses: tc.init, ContainerStatuses: tc.regular},
			}
			if diff := cmp.Diff(tc.want, ObservePod(pod).ImagePull); diff != "" {
				t.Errorf("ImagePull (-want +got):\n%s", diff)
			}
		})
	}
	if (ImagePull{Reason: "ErrImageNeverPull"}).Retried() || (ImagePull{Reason: "InvalidImageName"}).Retried() || !(ImagePull{Reason: "ImagePullBackOff"}).Retried() {
		t.Error("Retried: want false for ErrImageNeverPull and InvalidImageName only")
	}
}

// Pods waiting for the same image share a class whatever the kubelet's
// words on each; the group quotes its first Pod's.
func TestPodGroupsQuoteTheFirstPodsImagePullMessage(t *testing.T) {
	js := &jobset.JobSet{}
	pod := func(name, message string) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{jobset.ReplicatedJobNameKey: "w", jobset.RestartsKey: "0"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "registry.example/trainer:1"}}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "trainer",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: message}}}}},
		}
	}
	groups := FamilyOf(js, nil, []corev1.Pod{pod("c", "on c"), pod("a", "on a"), pod("b", "on b")}).PodGroups(js, "0")
	if len(groups) != 1 || groups[0].N() != 3 || groups[0].ImagePullMessage != "on a" {
		t.Fatalf("groups %+v, want one of 3 Pods quoting Pod a", groups)
	}
}
