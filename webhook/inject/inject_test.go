package inject

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// Set UPDATE_GOLDEN=1 to rewrite testdata/*.injected.yaml from the inputs.
var update = os.Getenv("UPDATE_GOLDEN") != ""

// ignoreUnsetInWant compares only what the first (wanted) value sets: a
// field the wanted object leaves at its zero value, or a map key only the
// second holds, may hold anything (a default, an injected extra). List
// items still compare one by one.
var ignoreUnsetInWant = cmp.FilterPath(func(p cmp.Path) bool {
	want, _ := p.Last().Values()
	switch p.Last().(type) {
	case cmp.StructField:
		return want.IsZero()
	case cmp.MapIndex:
		return !want.IsValid()
	}
	return false
}, cmp.Ignore())

// Kubernetes merges containers and env vars by name: compare them so.
var (
	containersByName = cmp.Transformer("byName", func(in []corev1.Container) map[string]corev1.Container {
		out := make(map[string]corev1.Container, len(in))
		for _, c := range in {
			out[c.Name] = c
		}
		return out
	})
	envByName = cmp.Transformer("byName", func(in []corev1.EnvVar) map[string]corev1.EnvVar {
		out := make(map[string]corev1.EnvVar, len(in))
		for _, e := range in {
			out[e.Name] = e
		}
		return out
	})
)

func defaultAgent() configv1alpha1.Agent {
	cfg := &configv1alpha1.Configuration{}
	configv1alpha1.SetDefaults(cfg)
	return cfg.Agent
}

func load(t *testing.T, path string) *jobset.JobSet {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var js jobset.JobSet
	if err := yaml.UnmarshalStrict(data, &js); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &js
}

func mutate(js *jobset.JobSet, agent configv1alpha1.Agent) []Decision {
	jobset.Default(js)
	return Inject(js, agent)
}

// TestGolden injects every testdata/<case>.yaml and compares the result with
// testdata/<case>.injected.yaml; injecting the result again must change
// nothing.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, in := range inputs {
		if strings.HasSuffix(in, ".injected.yaml") {
			continue
		}
		golden := strings.TrimSuffix(in, ".yaml") + ".injected.yaml"
		seen[golden] = true
		t.Run(filepath.Base(in), func(t *testing.T) {
			js := load(t, in)
			mutate(js, defaultAgent())
			got, err := yaml.Marshal(js)
			if err != nil {
				t.Fatal(err)
			}
			if update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("no golden file (run with UPDATE_GOLDEN=1): %v", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("injection differs from %s (-want +got):\n%s", golden, diff)
			}

			t.Run("idempotent", func(t *testing.T) {
				again := js.DeepCopy()
				if d := mutate(again, defaultAgent()); len(d) != 0 {
					t.Errorf("second injection decided %v", d)
				}
				if diff := cmp.Diff(js, again); diff != "" {
					t.Errorf("mutate(mutate(x)) != mutate(x) (-once +twice):\n%s", diff)
				}
			})
		})
	}
	goldens, _ := filepath.Glob("testdata/*.injected.yaml")
	for _, g := range goldens {
		if !seen[g] {
			t.Errorf("golden file %s has no input", g)
		}
	}
}

// TestSeedStory1Equivalence: the in-place restart KEP's Story 1 manifest
// with its whole agent block removed, injected with an agent configured like
// the KEP's, holds every field of the KEP's full manifest.
func TestSeedStory1Equivalence(t *testing.T) {
	agent := defaultAgent()
	agent.ContainerName = "agent"
	agent.Image = "ghcr.io/inplace-dev/inplace-agent:latest"
	agent.RestartExitCode = 88
	agent.BarrierPort = 8080
	agent.BarrierTimeoutSeconds = 600

	full := load(t, "testdata/story1-full.yaml")
	jobset.Default(full)
	injected := load(t, "testdata/story1-without-agent.yaml")
	mutate(injected, agent)

	if diff := cmp.Diff(full.Spec, injected.Spec, ignoreUnsetInWant, containersByName, envByName); diff != "" {
		t.Errorf("injected spec differs from the full manifest where the manifest sets a field (-want +got):\n%s", diff)
	}
}

func TestWorkerRuleFromPodFailurePolicy(t *testing.T) {
	js := load(t, "testdata/story2-without-agent.yaml")
	mutate(js, defaultAgent())
	want := []corev1.ContainerRestartRule{{
		Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0, 3, 4}},
	}}
	rules := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].RestartPolicyRules
	if diff := cmp.Diff(want, rules); diff != "" {
		t.Errorf("Story 2 worker rules (-want +got):\n%s", diff)
	}

	js = load(t, "testdata/podfailurepolicy-notin.yaml")
	mutate(js, defaultAgent())
	want = []corev1.ContainerRestartRule{{
		Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{137, 143}},
	}}
	rules = js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].RestartPolicyRules
	if diff := cmp.Diff(want, rules); diff != "" {
		t.Errorf("FailJob NotIn [143 137] (137 ignored first): worker rules (-want +got):\n%s", diff)
	}
}

func TestDecisions(t *testing.T) {
	js := load(t, "testdata/minimal.yaml")
	got := mutate(js, defaultAgent())
	var keys []string
	for _, d := range got {
		keys = append(keys, d.key())
		if d.Why == "" {
			t.Errorf("decision %s has no reason", d.key())
		}
	}
	want := []string{"job-settings:workers", "agent:workers", "worker-restart-rules:workers/trainer", "worker-restart-rules:workers/metrics"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	if js.Annotations[InjectedAnnotation] != "agent:workers,job-settings:workers,worker-restart-rules:workers/metrics,worker-restart-rules:workers/trainer" {
		t.Errorf("recorded %q", js.Annotations[InjectedAnnotation])
	}
	// The agent comes after the user's init containers, which run before
	// the barrier.
	inits := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.InitContainers
	if len(inits) != 2 || inits[0].Name != "fetch-checkpoint" || inits[1].Name != "inplace-agent" {
		t.Errorf("init containers %v", inits)
	}
}

// TestAgentStateVolumeIsAnEmptyDir: the agent's state goes with its Pod,
// whatever a volume of the same name in the manifest said, and injecting
// again changes nothing.
func TestAgentStateVolumeIsAnEmptyDir(t *testing.T) {
	for name, user := range map[string]corev1.VolumeSource{
		"a hostPath":            {HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kept"}},
		"an emptyDir in memory": {EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}},
	} {
		t.Run(name, func(t *testing.T) { testAgentStateVolume(t, user) })
	}
}

func testAgentStateVolume(t *testing.T, user corev1.VolumeSource) {
	js := load(t, "testdata/minimal.yaml")
	pod := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: AgentStateVolume, VolumeSource: user})
	mutate(js, defaultAgent())
	once := js.DeepCopy()
	mutate(js, defaultAgent())
	if diff := cmp.Diff(once.Spec, js.Spec); diff != "" {
		t.Errorf("a second injection changed the spec (-first +second):\n%s", diff)
	}
	pod = &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	var found []corev1.Volume
	for _, v := range pod.Volumes {
		if v.Name == AgentStateVolume {
			found = append(found, v)
		}
	}
	if len(found) != 1 || found[0].EmptyDir == nil || found[0].HostPath != nil || found[0].EmptyDir.Medium != "" || found[0].EmptyDir.SizeLimit.String() != "1Mi" {
		t.Errorf("volumes named %s: %+v, want one emptyDir of 1Mi", AgentStateVolume, found)
	}
}
