package policies

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

func BenchmarkInputConversion(b *testing.B) {
	obj := admitted(b, "inplace-story2.yaml", nil)
	for b.Loop() {
		if _, err := baseInput(Input{Operation: "CREATE", Object: obj}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEachBuiltin(b *testing.B) {
	names, _ := BuiltinNames()
	obj := admitted(b, "inplace-story2.yaml", nil)
	for _, keep := range names {
		var disabled []string
		for _, n := range names {
			if n != keep {
				disabled = append(disabled, n)
			}
		}
		e, err := NewEngine(disabled)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(keep, func(b *testing.B) {
			for b.Loop() {
				if _, err := e.Evaluate(b.Context(), Input{Operation: "CREATE", Object: obj}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAdminPolicies evaluates N admin policies with parameters on one
// JobSet, all matching or none.
func BenchmarkAdminPolicies(b *testing.B) {
	obj := admitted(b, "inplace-story2.yaml", nil)
	names, _ := BuiltinNames()
	for _, n := range []int{1, 100, 1000} {
		for _, matching := range []bool{true, false} {
			e, err := NewEngine(names)
			if err != nil {
				b.Fatal(err)
			}
			match := func(in Input) bool { return in.Namespace == "prod" }
			if matching {
				match = nil
			}
			for i := range n {
				src := strings.Replace(maxRestartsPolicy, "package guardrails.maxrestarts", fmt.Sprintf("package guardrails.maxrestarts_%d", i), 1)
				p, err := Compile(Source{Name: fmt.Sprintf("p%04d", i), Rego: src, Action: Deny, Match: match, Parameters: map[string]any{"limit": 100}})
				if err != nil {
					b.Fatal(err)
				}
				e.SetPolicy(p)
			}
			b.Run(fmt.Sprintf("policies=%d/matching=%v", n, matching), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := e.Evaluate(b.Context(), Input{Operation: "CREATE", Object: obj, Namespace: "dev"}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// JobSets as large as an admission request carries (the API server reads
// at most 3 MiB), shaped to make the built-in checks walk as much as they
// can, built at a size: 1 is maximal. Before the checks were linear, the
// first took minutes, and the second 7 s with 2 of its containers.
var maximalJobSets = map[string]func(t testing.TB, generation string, size float64) map[string]any{
	"4,000 failure-policy rules, 1,500 replicated jobs, 2,500 claim templates": func(t testing.TB, generation string, size float64) map[string]any {
		return maximalJobSet(t, generation, int(1500*size), int(4000*size))
	},
	"a podFailurePolicy at the Job API's limits, 1,600 containers": func(t testing.TB, generation string, size float64) map[string]any {
		return maximalPodFailurePolicy(t, generation, int(1600*size))
	},
}

// TestBuiltinsOnMaximalJobSets requires the built-ins to be linear in the
// JobSet's size: half a maximal JobSet, evaluated as an update, may take at
// most linearBound times as long as one an eighth that size. A quadratic
// check takes 64 times as long. The time itself is the benchmark's (go
// test -bench BuiltinsOnMaximalJobSets): 0.9 s and 0.7 s for the maximal
// ones on the 2-core development machine, where the engine's total limit
// is 5 s. Half, so that the test stays short under the race detector;
// each size's best of two runs, so that the machine's other work weighs
// on neither alone.
func TestBuiltinsOnMaximalJobSets(t *testing.T) {
	const large, fraction, linearBound, runs = 0.5, 8, 24, 2
	e, err := NewEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The assertion is on the time taken, not on the engine's limit.
	e.SetLimits(Limits{TotalTimeout: time.Hour})
	for name, build := range maximalJobSets {
		t.Run(name, func(t *testing.T) {
			best := func(size float64) time.Duration {
				old, obj := build(t, "1", size), build(t, "2", size)
				raw, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				if len(raw) > 3<<20 {
					t.Fatalf("%d bytes: more than an admission request carries", len(raw))
				}
				var fastest time.Duration
				for range runs {
					start := time.Now()
					d, err := e.Evaluate(t.Context(), Input{Operation: "UPDATE", Object: obj, OldObject: old})
					took := time.Since(start)
					if err != nil {
						t.Fatal(err)
					}
					if len(d.Denied) == 0 {
						t.Fatal("nothing denied: the JobSet no longer exercises the checks")
					}
					if fastest == 0 || took < fastest {
						fastest = took
					}
				}
				return fastest
			}
			small, big := best(large/fraction), best(large)
			if ratio := float64(big) / float64(small); ratio > linearBound {
				t.Errorf("the built-ins took %v on half a maximal JobSet, %.0f times the %v on one an eighth that size; want at most %d times (linear: about %d)",
					big, ratio, small, linearBound, fraction)
			}
		})
	}
}

func BenchmarkBuiltinsOnMaximalJobSets(b *testing.B) {
	e, err := NewEngine(nil)
	if err != nil {
		b.Fatal(err)
	}
	e.SetLimits(Limits{TotalTimeout: time.Hour})
	for name, build := range maximalJobSets {
		old, obj := build(b, "1", 1), build(b, "2", 1)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := e.Evaluate(b.Context(), Input{Operation: "UPDATE", Object: obj, OldObject: old}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// maximalJobSet has failure-policy rules that all share one name and
// restart Jobs of replicated jobs with too many replicas, replicated jobs
// that depend on ones listed after them, and the CRD's 50 claim policies of
// 50 templates named alike and mounted by no container. generation labels
// every Pod template, so that two generations differ in every replicated
// job.
func maximalJobSet(t testing.TB, generation string, replicatedJobs, rules int) map[string]any {
	t.Helper()
	return admitted(t, "inplace-story2.yaml", func(js *jobset.JobSet) {
		worker := js.Spec.ReplicatedJobs[0]
		js.Spec.ReplicatedJobs = nil
		for i := range replicatedJobs {
			rj := *worker.DeepCopy()
			rj.Name = fmt.Sprintf("w%05d", i)
			rj.Replicas = 2000
			rj.Template.Spec.Template.Labels = map[string]string{"generation": generation}
			for d := range 5 {
				rj.DependsOn = append(rj.DependsOn, jobset.DependsOn{Name: fmt.Sprintf("w%05d", (i+d+1)%replicatedJobs), Status: jobset.DependencyReady})
			}
			js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, rj)
		}
		js.Spec.FailurePolicy.Rules = nil
		for range rules {
			js.Spec.FailurePolicy.Rules = append(js.Spec.FailurePolicy.Rules, jobset.FailurePolicyRule{Name: "same", Action: jobset.RestartJob})
		}
		js.Spec.VolumeClaimPolicies = nil
		for range 50 {
			var p jobset.VolumeClaimPolicy
			for range 50 {
				var claim corev1.PersistentVolumeClaim
				claim.Name = "data"
				p.Templates = append(p.Templates, claim)
			}
			js.Spec.VolumeClaimPolicies = append(js.Spec.VolumeClaimPolicies, p)
		}
	})
}

// maximalPodFailurePolicy has one replicated job whose podFailurePolicy
// fails the Job on 20 rules of 255 exit codes each, and whose containers
// each restart in place on 20 rules that every one of those codes matches.
func maximalPodFailurePolicy(t testing.TB, generation string, containers int) map[string]any {
	t.Helper()
	return admitted(t, "inplace-story2.yaml", func(js *jobset.JobSet) {
		rj := &js.Spec.ReplicatedJobs[0]
		rj.Template.Spec.Template.Labels = map[string]string{"generation": generation}
		pfp := &batchv1.PodFailurePolicy{}
		for n := range 20 {
			var codes []int32
			for c := range 255 {
				codes = append(codes, int32(n*255+c+1))
			}
			pfp.Rules = append(pfp.Rules, batchv1.PodFailurePolicyRule{
				Action:      batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: codes},
			})
		}
		rj.Template.Spec.PodFailurePolicy = pfp
		worker := rj.Template.Spec.Template.Spec.Containers[0]
		rj.Template.Spec.Template.Spec.Containers = nil
		for i := range containers {
			c := *worker.DeepCopy()
			c.Name = fmt.Sprintf("c%d", i)
			c.RestartPolicyRules = nil
			for k := range 20 {
				c.RestartPolicyRules = append(c.RestartPolicyRules, corev1.ContainerRestartRule{
					Action:    corev1.ContainerRestartRuleActionRestart,
					ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{int32(k)}},
				})
			}
			rj.Template.Spec.Template.Spec.Containers = append(rj.Template.Spec.Template.Spec.Containers, c)
		}
	})
}
