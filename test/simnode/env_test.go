package simnode

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/inplace-dev/inplace/agent"
	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/wrappers"
	"github.com/inplace-dev/inplace/webhook/inject"
)

// injectedAgent is the agent container the webhook injects.
func injectedAgent(t *testing.T) corev1.Container {
	t.Helper()
	js := wrappers.MakeJobSet("train", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(1).Obj()).
		FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart}).Obj()
	conf := &configv1alpha1.Configuration{}
	configv1alpha1.SetDefaults(conf)
	inject.Inject(js, conf.Agent)
	for _, c := range js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.InitContainers {
		if c.Name == conf.Agent.ContainerName {
			return c
		}
	}
	t.Fatal("no agent injected")
	return corev1.Container{}
}

// TestContainerEnv: the Downward API is evaluated as the kubelet does, from
// the Pod as the node has it when the container starts; an annotation the
// Pod lacks is an empty variable.
func TestContainerEnv(t *testing.T) {
	c := injectedAgent(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "train-workers-0-0-abcde", Namespace: "ns", UID: "uid-1", Annotations: map[string]string{
			jobset.JobSetNameKey: "train", jobset.ReplicatedJobNameKey: "workers",
		}},
		Spec: corev1.PodSpec{NodeName: "sim-0"},
	}
	env, err := containerEnv(pod, &c, "10.0.1.1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		protocol.EnvNamespace: "ns", protocol.EnvPodName: "train-workers-0-0-abcde", protocol.EnvPodUID: "uid-1",
		protocol.EnvPodIP: "10.0.1.1", protocol.EnvJobSetName: "train", protocol.EnvReplicatedJobName: "workers",
		protocol.EnvPodEpoch: "", protocol.EnvRestartExitCode: "88", protocol.EnvBarrierPort: "18080",
		protocol.EnvReportTokenPath: "/var/run/secrets/inplace.dev/reports/token",
		protocol.EnvAgentStateDir:   protocol.AgentStateDir,
		protocol.EnvBarrierHold:     "900",
	}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("environment at the first start (-want +got):\n%s", diff)
	}

	// The agent reported epoch 2; the node's copy of the Pod has it when
	// the container starts again.
	reported := pod.DeepCopy()
	reported.Annotations[jobset.EpochKey] = "2"
	if env, err = containerEnv(reported, &c, "10.0.1.1"); err != nil {
		t.Fatal(err)
	}
	if got := env[protocol.EnvPodEpoch]; got != "2" {
		t.Errorf("%s = %q after the epoch 2 was reported, want 2", protocol.EnvPodEpoch, got)
	}
}

// TestAgentConfigAtEachStart: each start of the agent's container takes
// its environment from the Pod as the node has it then, as a kubelet does:
// the agent restarted after its report is given its epoch.
func TestAgentConfigAtEachStart(t *testing.T) {
	c := injectedAgent(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1",
		Annotations: map[string]string{jobset.JobSetNameKey: "train", jobset.ReplicatedJobNameKey: "workers"}}}
	r := newPodRunner(&Sim{}, pod, "10.0.1.1")

	first, err := r.agentConfig(&c)
	if err != nil {
		t.Fatal(err)
	}
	want := agent.Config{ReplicatedJob: "workers", RestartExitCode: 88, Listen: "10.0.1.1:18080", BarrierHold: 900 * time.Millisecond, PodEpoch: ptr.To[int32](0)}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("first start (-want +got):\n%s", diff)
	}

	reported := pod.DeepCopy()
	reported.Annotations[jobset.EpochKey] = "3"
	r.update(reported)
	again, err := r.agentConfig(&c)
	if err != nil {
		t.Fatal(err)
	}
	if again.PodEpoch == nil || *again.PodEpoch != 3 {
		t.Errorf("restarted after its report of epoch 3: PodEpoch %v, want 3", again.PodEpoch)
	}
}
