package reconciler

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/jobsetpolicy"
)

const endless = "package slow\n\ndeny contains \"never\" if {\n\tsome i in numbers.range(1, 1000000000)\n\ti < 0\n}\n"

// failingEngine returns an engine whose policy "slow" (generation 1) has
// failed its evaluations.
func failingEngine(t *testing.T) *policies.Engine {
	t.Helper()
	names, _ := policies.BuiltinNames()
	e, err := policies.NewEngine(names)
	if err != nil {
		t.Fatal(err)
	}
	e.SetLimits(policies.Limits{PolicyTimeout: 10 * time.Millisecond})
	p, err := jobsetpolicy.Compile("slow", &policyv1alpha1.JobSetPolicySpec{Rego: endless}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.UID, p.Generation = "a", 1
	e.SetPolicy(p)
	for range 3 {
		_, _ = e.Evaluate(context.Background(), policies.Input{Operation: "CREATE", Object: map[string]any{}})
	}
	if !e.Health("slow").Failing {
		t.Fatal("the endless policy is not failing")
	}
	return e
}

func TestReadyConditionIsTheLeaders(t *testing.T) {
	elected, notYet := make(chan struct{}), make(chan struct{})
	close(elected)
	failing := metav1.Condition{Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: policyv1alpha1.ReasonEvaluationFailing, ObservedGeneration: 1}
	cases := map[string]struct {
		elected <-chan struct{}
		current []metav1.Condition
		want    string
	}{
		"the leader reports the failures it saw":      {elected: elected, want: policyv1alpha1.ReasonEvaluationFailing},
		"another replica says nothing of health":      {elected: notYet, want: policyv1alpha1.ReasonCompiled},
		"another replica keeps what the leader wrote": {elected: notYet, current: []metav1.Condition{failing}, want: policyv1alpha1.ReasonEvaluationFailing},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &Reconciler{engine: failingEngine(t), elected: tc.elected}
			p := &policyv1alpha1.JobSetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "slow", Generation: 1}, Status: policyv1alpha1.JobSetPolicyStatus{Conditions: tc.current}}
			if got := r.readyCondition(p); got.Reason != tc.want {
				t.Errorf("reason %s, want %s (%s)", got.Reason, tc.want, got.Message)
			}
		})
	}
}

// Compiling the same generation again keeps what the engine learned of
// it; a new generation, or a new object under the name, starts afresh.
// The reconciler compiles only what is not in force (InForce).
func TestSameGenerationKeepsHealth(t *testing.T) {
	e := failingEngine(t)
	if !e.InForce("slow", "a", 1) || e.InForce("slow", "a", 2) || e.InForce("slow", "b", 1) {
		t.Error("InForce does not name exactly generation 1 of object a")
	}
	p, _ := jobsetpolicy.Compile("slow", &policyv1alpha1.JobSetPolicySpec{Rego: endless}, nil, nil)
	p.UID, p.Generation = "a", 1
	e.SetPolicy(p)
	if !e.Health("slow").Failing {
		t.Error("recompiling generation 1 forgot its failures")
	}
	p, _ = jobsetpolicy.Compile("slow", &policyv1alpha1.JobSetPolicySpec{Rego: endless}, nil, nil)
	p.UID, p.Generation = "a", 2
	e.SetPolicy(p)
	if e.Health("slow").Failing {
		t.Error("generation 2 inherited generation 1's failures")
	}

	e = failingEngine(t)
	p, _ = jobsetpolicy.Compile("slow", &policyv1alpha1.JobSetPolicySpec{Rego: endless}, nil, nil)
	p.UID, p.Generation = "b", 1
	e.SetPolicy(p)
	if e.Health("slow").Failing {
		t.Error("a policy created again under its name inherited the deleted one's failures")
	}
}

func TestAuditKeepsTheFirstViolationsInOrder(t *testing.T) {
	var f policyFindings
	for i := 50; i > 0; i-- {
		f.add(policyv1alpha1.AuditViolation{Namespace: "ns", Name: fmt.Sprintf("js-%02d", i), Message: "m"})
	}
	if f.total != 50 || len(f.first) != maxListedViolations {
		t.Fatalf("total %d, listed %d", f.total, len(f.first))
	}
	for i, v := range f.first {
		if want := fmt.Sprintf("js-%02d", i+1); v.Name != want {
			t.Errorf("listed[%d] = %s, want %s", i, v.Name, want)
		}
	}
}

// An audit out of budget stops, and says it did not reach every JobSet.
func TestAuditWithinItsBudget(t *testing.T) {
	e := failingEngine(t)
	items := make([]jobset.JobSet, 200)
	for i := range items {
		items[i].Name, items[i].Namespace = fmt.Sprintf("js-%d", i), "ns"
	}
	a := &Auditor{Engine: e, Workers: 2}
	start := time.Now()
	found, complete := a.evaluate(context.Background(), items, 100*time.Millisecond)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the audit took %v with a budget of 100ms", took)
	}
	if complete {
		t.Error("200 JobSets at 10 ms each reported complete within 100 ms")
	}
	if f := found["slow"]; f == nil || f.total == 0 || f.total >= len(items) {
		t.Errorf("found %+v: want some of the JobSets, not all", f)
	}

	fast, _ := policies.NewEngine(nil)
	// The cache's JobSets carry no kind; the audit's input does, as
	// admission's.
	p, _ := jobsetpolicy.Compile("fast", &policyv1alpha1.JobSetPolicySpec{Rego: "package fast\n\ndeny contains \"x\" if {\n\tinput.object.metadata.name\n\tinput.object.kind == \"JobSet\"\n\tinput.object.apiVersion == \"jobset.x-k8s.io/v1alpha2\"\n}\n"}, nil, nil)
	fast.SetPolicy(p)
	a.Engine = fast
	found, complete = a.evaluate(context.Background(), items, time.Minute)
	if !complete || found["fast"].total != len(items) {
		t.Errorf("complete %v, total %d: want every JobSet", complete, found["fast"].total)
	}
}
