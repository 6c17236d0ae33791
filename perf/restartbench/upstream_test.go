package restartbench

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

func TestUpstreamStrategiesComeLast(t *testing.T) {
	parsed, err := ParseStrategies("upstream/Recreate,InPlaceRestart,upstream/InPlaceRestart,Recreate")
	if err != nil {
		t.Fatal(err)
	}
	got := upstreamLast(parsed)
	want := []Strategy{InPlace, Recreate, UpstreamRecreate, UpstreamInPlace}
	if !slices.Equal(got, want) {
		t.Errorf("upstreamLast(%v) = %v, want %v: upstream's controller does not hand the cluster back", parsed, got, want)
	}
	if UpstreamInPlace.restartStrategy() != jobset.InPlaceRestart || !UpstreamInPlace.upstream() || InPlace.upstream() {
		t.Errorf("%s: restart strategy %s, upstream %v", UpstreamInPlace, UpstreamInPlace.restartStrategy(), UpstreamInPlace.upstream())
	}
}

func TestUpstreamStrategiesNeedRealNodes(t *testing.T) {
	err := Config{Nodes: []int{4}, Strategies: []Strategy{InPlace, UpstreamInPlace}}.validate()
	if err == nil || !strings.Contains(err.Error(), "need real nodes") {
		t.Errorf("Run on simulated nodes with %s: %v, want a refusal naming real nodes", UpstreamInPlace, err)
	}
}

func TestPodEpochReadsEitherAgent(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		want        int32
		ok          bool
	}{
		{map[string]string{jobset.EpochKey: "3"}, 3, true},
		// Upstream's attempt 2 is epoch 3.
		{map[string]string{jobset.InPlaceRestartAttemptKey: "2"}, 3, true},
		{map[string]string{jobset.InPlaceRestartAttemptKey: "x"}, 0, false},
		{nil, 0, false},
	} {
		got, ok := podEpoch(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}})
		if got != tc.want || ok != tc.ok {
			t.Errorf("podEpoch(%v) = %d, %v; want %d, %v", tc.annotations, got, ok, tc.want, tc.ok)
		}
	}
}

func TestUpstreamInPlaceRestartCountedByItsAttempt(t *testing.T) {
	before := jobset.JobSetStatus{Restarts: 2, DeprecatedEpoch: 1, SyncedEpoch: 2}
	deprecated := jobset.JobSetStatus{Restarts: 2, DeprecatedEpoch: 2, SyncedEpoch: 2}
	recreated := jobset.JobSetStatus{Restarts: 3, DeprecatedEpoch: 1, SyncedEpoch: 2}
	if !restartCounted(UpstreamInPlace, before)(deprecated) || restartCounted(UpstreamInPlace, before)(recreated) {
		t.Errorf("upstream's in-place restart is counted by its deprecated attempt alone")
	}
	if restartCounted(InPlace, before)(deprecated) || !restartCounted(UpstreamRecreate, before)(recreated) {
		t.Errorf("every other restart is counted by status.restarts")
	}
}

func TestInProcessStrategyNeedsRealNodesAndAnnotatesItsScope(t *testing.T) {
	err := Config{Nodes: []int{4}, Strategies: []Strategy{InPlaceInProcess}}.validate()
	if err == nil || !strings.Contains(err.Error(), "first starts on real nodes only") {
		t.Errorf("Run on simulated nodes with %s: %v, want a refusal naming real nodes", InPlaceInProcess, err)
	}
	err = Config{Nodes: []int{4}, RealNodes: 2, Repeats: 1, Strategies: []Strategy{InPlaceInProcess}}.validate()
	if err == nil || !strings.Contains(err.Error(), "first starts on real nodes only") {
		t.Errorf("Run with restarts with %s: %v, want a refusal: the test worker's restarts would be process scope's", InPlaceInProcess, err)
	}
	if err := (Config{Nodes: []int{4}, RealNodes: 2, Strategies: []Strategy{InPlaceInProcess}}).validate(); err != nil {
		t.Errorf("Run on real nodes with %s: %v", InPlaceInProcess, err)
	}
	js := jobSetFor("js", "ns", 2, InPlaceInProcess)
	if got := js.Annotations[protocol.RestartScopeAnnotation]; got != protocol.RestartScopeInProcess || js.Spec.FailurePolicy.RestartStrategy != jobset.InPlaceRestart {
		t.Errorf("%s: scope %q, restart strategy %s", InPlaceInProcess, got, js.Spec.FailurePolicy.RestartStrategy)
	}
}
