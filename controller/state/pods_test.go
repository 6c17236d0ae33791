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
