package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/podfailure"
	"github.com/inplace-dev/inplace/policies"
)

// TestWorkerRulesAgainstFailJobCodes: whatever the podFailurePolicy, the
// worker rules the mutating webhook injects pass the built-in policies,
// and the built-in that refuses a worker's own restart rule matching an
// exit code the policy fails the Job on reads the policy as the Job
// controller does (podfailure.FailsJob): a rule In [c] is refused exactly
// when c fails the Job, a rule NotIn [0, c] exactly when another code does.
func TestWorkerRulesAgainstFailJobCodes(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("inject", "testdata", "minimal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest jobset.JobSet
	if err := yaml.UnmarshalStrict(data, &manifest); err != nil {
		t.Fatal(err)
	}
	engine, err := policies.NewEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &configv1alpha1.Configuration{}
	configv1alpha1.SetDefaults(cfg)
	ctx := context.Background()
	evaluate := func(raw []byte) policies.Decision {
		t.Helper()
		obj, err := toMap(raw)
		if err != nil {
			t.Fatal(err)
		}
		d, err := engine.Evaluate(ctx, policies.Input{Operation: "CREATE", Namespace: "ns", Object: obj})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	// Every code the policies below name, and codes none names: what the
	// policy says of those stands for every code it does not name.
	codes := []int32{1, 2, 3, 4, 5, 137, 143, 200}
	const worker = "trainer" // the first container
	rng := rand.New(rand.NewPCG(262, 5307))
	for n := range 150 {
		pfp := randomPodFailurePolicy(rng)
		js := manifest.DeepCopy()
		js.Spec.ReplicatedJobs[0].Template.Spec.PodFailurePolicy = pfp
		mutated, err := Pipeline{Agent: cfg.Agent, Engine: engine}.Mutate(ctx, js, policies.Input{})
		raw := mutated.JSON
		if err != nil {
			t.Fatal(err)
		}
		if d := evaluate(raw); len(d.Denied) > 0 {
			t.Errorf("case %d, %s: the injected JobSet is denied: %v", n, describe(pfp), d.Denied)
		}
		injected, err := decode(raw)
		if err != nil {
			t.Fatal(err)
		}

		refused := func(op corev1.ContainerRestartRuleOnExitCodesOperator, values ...int32) bool {
			user := injected.DeepCopy()
			user.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{
				Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
				ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: op, Values: values},
			}}
			raw, err := json.Marshal(user)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range evaluate(raw).Denied {
				if strings.Contains(v.Message, "containers[0].restartPolicyRules[0] (RestartAllContainers)") && strings.Contains(v.Message, "sends to FailJob") {
					return true
				}
			}
			return false
		}
		for _, c := range codes {
			if got, want := refused(corev1.ContainerRestartRuleOnExitCodesOpIn, c), podfailure.FailsJob(worker, pfp, c); got != want {
				t.Errorf("case %d, %s: rule In [%d] refused %v, want %v", n, describe(pfp), c, got, want)
			}
			want := false
			for _, other := range codes {
				want = want || other != c && podfailure.FailsJob(worker, pfp, other)
			}
			if got := refused(corev1.ContainerRestartRuleOnExitCodesOpNotIn, 0, c); got != want {
				t.Errorf("case %d, %s: rule NotIn [0 %d] refused %v, want %v", n, describe(pfp), c, got, want)
			}
		}
	}
}

// randomPodFailurePolicy returns one to three onExitCodes rules, for the
// first container, the second, or any.
func randomPodFailurePolicy(rng *rand.Rand) *batchv1.PodFailurePolicy {
	actions := []batchv1.PodFailurePolicyAction{batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyActionCount}
	operators := []batchv1.PodFailurePolicyOnExitCodesOperator{batchv1.PodFailurePolicyOnExitCodesOpIn, batchv1.PodFailurePolicyOnExitCodesOpNotIn}
	values := [][]int32{{3}, {3, 4}, {137, 143}, {137}, {1, 2, 3}, {4, 143}}
	containers := []*string{nil, ptr.To("trainer"), ptr.To("trainer"), ptr.To("metrics")}
	pfp := &batchv1.PodFailurePolicy{}
	for range 1 + rng.IntN(3) {
		pfp.Rules = append(pfp.Rules, batchv1.PodFailurePolicyRule{
			Action: actions[rng.IntN(len(actions))],
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: containers[rng.IntN(len(containers))],
				Operator:      operators[rng.IntN(len(operators))],
				Values:        values[rng.IntN(len(values))],
			},
		})
	}
	return pfp
}

func describe(pfp *batchv1.PodFailurePolicy) string {
	var rules []string
	for _, r := range pfp.Rules {
		rules = append(rules, fmt.Sprintf("%s %s %v for %s", r.Action, r.OnExitCodes.Operator, r.OnExitCodes.Values, ptr.Deref(r.OnExitCodes.ContainerName, "any container")))
	}
	return "podFailurePolicy [" + strings.Join(rules, "; ") + "]"
}
