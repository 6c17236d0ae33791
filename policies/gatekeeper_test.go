package policies

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// containerLimits is written as gatekeeper-library writes its policies:
// Rego v0, input.review.object, input.parameters, violation.
const containerLimits = `package k8scontainerlimits

missing(obj, field) = true {
  not obj[field]
}

missing(obj, field) = true {
  obj[field] == ""
}

violation[{"msg": msg}] {
  container := input.review.object.spec.containers[_]
  not container.resources.limits.cpu
  msg := sprintf("container <%v> has no cpu limit", [container.name])
}

violation[{"msg": msg}] {
  container := input.review.object.spec.containers[_]
  missing(object.get(container, ["resources", "limits"], {}), "memory")
  input.parameters.requireMemory
  msg := sprintf("container <%v> has no memory limit", [container.name])
}
`

func twoJobs(workerLimits map[string]any) map[string]any {
	rj := func(name string, resources map[string]any) map[string]any {
		c := map[string]any{"name": "main", "image": "busybox"}
		if resources != nil {
			c["resources"] = resources
		}
		return map[string]any{"name": name, "replicas": 1, "template": map[string]any{"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"app": name}},
			"spec":     map[string]any{"containers": []any{c}},
		}}}}
	}
	return map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"name": "train", "namespace": "ml"},
		"spec": map[string]any{"replicatedJobs": []any{
			rj("driver", map[string]any{"limits": map[string]any{"cpu": "1", "memory": "1Gi"}}),
			rj("workers", workerLimits),
		}},
	}
}

func adminEngine(t *testing.T, ps ...Source) *Engine {
	t.Helper()
	names, _ := BuiltinNames()
	e, err := NewEngine(names)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range ps {
		p, err := e.Compile(src)
		if err != nil {
			t.Fatalf("compiling %s: %v", src.Name, err)
		}
		e.SetPolicy(p)
	}
	return e
}

func TestGatekeeperPodPolicyRunsOnPodTemplatesUnedited(t *testing.T) {
	e := adminEngine(t, Source{Name: "limits", Rego: containerLimits, RegoVersion: RegoV0, Target: TargetPodTemplates, Parameters: map[string]any{"requireMemory": true}})
	cases := map[string]struct {
		workers map[string]any
		want    []string
	}{
		"no limits":       {workers: nil, want: []string{"limits: replicatedJobs[workers]: container <main> has no cpu limit", "limits: replicatedJobs[workers]: container <main> has no memory limit"}},
		"cpu only":        {workers: map[string]any{"limits": map[string]any{"cpu": "2"}}, want: []string{"limits: replicatedJobs[workers]: container <main> has no memory limit"}},
		"every limit set": {workers: map[string]any{"limits": map[string]any{"cpu": "2", "memory": "2Gi"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: twoJobs(tc.workers), Namespace: "ml"})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range d.Denied {
				got = append(got, v.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("denied %q, want %q", got, tc.want)
			}
			if !slices.Equal(d.Evaluated, []string{"limits"}) {
				t.Errorf("evaluated %v, want [limits]", d.Evaluated)
			}
		})
	}
}

func TestReviewCarriesTheRequest(t *testing.T) {
	const who = `package who

deny contains msg if {
	input.review.kind.kind == "JobSet"
	input.review.object.metadata.name == input.object.metadata.name
	input.review.operation == "CREATE"
	not input.review.dryRun
	"ml-team" in input.review.userInfo.groups
	msg := sprintf("%s may not create %s/%s", [input.review.userInfo.username, input.review.namespace, input.review.name])
}
`
	e := adminEngine(t, Source{Name: "who", Rego: who})
	in := Input{Operation: "CREATE", Object: twoJobs(nil), Namespace: "ml", Name: "train", UserInfo: &UserInfo{Username: "alice", Groups: []string{"ml-team"}}}
	d, err := e.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Denied) != 1 || d.Denied[0].Message != "alice may not create ml/train" {
		t.Fatalf("denied %v, want alice's create", d.Denied)
	}
	in.DryRun = true
	if d, _ := e.Evaluate(context.Background(), in); len(d.Denied) != 0 {
		t.Errorf("a dry run: denied %v, want review.dryRun true", d.Denied)
	}
}

func TestRegoV1RefusesV0WithAHint(t *testing.T) {
	_, err := Compile(Source{Name: "limits", Rego: containerLimits})
	if err == nil || !strings.Contains(err.Error(), "set spec.regoVersion: v0") {
		t.Fatalf("error %v, want the hint to set regoVersion v0", err)
	}
}

func TestPodTemplatesPoliciesHaveNoPatches(t *testing.T) {
	_, err := Compile(Source{Name: "p", Rego: "package p\n\npatch contains {\"op\": \"add\", \"path\": \"/x\", \"value\": 1} if true\n", Target: TargetPodTemplates})
	if err == nil || !strings.Contains(err.Error(), "has no patch rules") {
		t.Fatalf("error %v, want a PodTemplates policy with patches refused", err)
	}
}

func TestExemptNamespacesSkipAdminPoliciesOnly(t *testing.T) {
	e := adminEngine(t, Source{Name: "always", Rego: "package always\n\ndeny contains \"no\" if true\n"})
	e.SetExemptNamespaces([]string{"kube-*", "ci"})
	for ns, want := range map[string]int{"ml": 1, "ci": 0, "kube-system": 0, "cim": 1} {
		d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: twoJobs(nil), Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Denied) != want {
			t.Errorf("namespace %s: denied %v, want %d", ns, d.Denied, want)
		}
	}
}

func TestPoliciesReadTheInventory(t *testing.T) {
	const quota = `package quota

deny contains msg if {
	running := count(data.inventory.namespace[input.object.metadata.namespace]["jobset.x-k8s.io/v1alpha2"].JobSet)
	max := to_number(data.inventory.cluster.v1.Namespace[input.object.metadata.namespace].metadata.labels["max-jobsets"])
	running >= max
	msg := sprintf("namespace %s runs %d JobSets, its limit", [input.object.metadata.namespace, running])
}
`
	e := adminEngine(t, Source{Name: "quota", Rego: quota})
	ctx := context.Background()
	inv := e.Inventory()
	put := func(ns, apiVersion, kind, name string, obj map[string]any) {
		t.Helper()
		if err := inv.Put(ctx, InventoryObject{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name, Object: obj, Size: 1}); err != nil {
			t.Fatal(err)
		}
	}
	put("", "v1", "Namespace", "ml", map[string]any{"metadata": map[string]any{"name": "ml", "labels": map[string]any{"max-jobsets": "2"}}})
	put("ml", "jobset.x-k8s.io/v1alpha2", "JobSet", "a", map[string]any{"metadata": map[string]any{"name": "a"}})
	in := Input{Operation: "CREATE", Object: twoJobs(nil), Namespace: "ml"}
	if d, err := e.Evaluate(ctx, in); err != nil || len(d.Denied) != 0 {
		t.Fatalf("one JobSet running of 2: denied %v (%v), want none", d.Denied, err)
	}
	put("ml", "jobset.x-k8s.io/v1alpha2", "JobSet", "b", map[string]any{"metadata": map[string]any{"name": "b"}})
	if d, _ := e.Evaluate(ctx, in); len(d.Denied) != 1 || d.Denied[0].Message != "namespace ml runs 2 JobSets, its limit" {
		t.Fatalf("two JobSets running of 2: denied %v, want the limit", d.Denied)
	}
	if err := inv.Delete(ctx, "jobset.x-k8s.io/v1alpha2", "JobSet", "ml", "a"); err != nil {
		t.Fatal(err)
	}
	if d, _ := e.Evaluate(ctx, in); len(d.Denied) != 0 {
		t.Fatalf("after a delete: denied %v, want none", d.Denied)
	}
	if s := inv.Stats(); s.Objects != 2 || s.ByKind["v1/Namespace"] != 1 {
		t.Errorf("stats %+v, want 2 objects, 1 Namespace", s)
	}
}

func TestInventoryIsBounded(t *testing.T) {
	inv := NewInventory(1)
	ctx := context.Background()
	obj := func(name string) InventoryObject {
		return InventoryObject{APIVersion: "v1", Kind: "Namespace", Name: name, Object: map[string]any{}, Size: 10}
	}
	if err := inv.Put(ctx, obj("a")); err != nil {
		t.Fatal(err)
	}
	if err := inv.Put(ctx, obj("a")); err != nil {
		t.Fatalf("replacing an object held: %v", err)
	}
	if err := inv.Put(ctx, obj("b")); !IsInventoryFull(err) {
		t.Fatalf("a second object: %v, want the inventory full", err)
	}
	if s := inv.Stats(); s.Objects != 1 || s.Dropped != 1 || s.Bytes != 10 {
		t.Errorf("stats %+v, want 1 object of 10 bytes, 1 dropped", s)
	}
}

func TestEvaluationsAreCountedByOutcome(t *testing.T) {
	e := adminEngine(t,
		Source{Name: "deny-ml", Rego: "package denyml\n\ndeny contains \"no\" if input.object.metadata.namespace == \"ml\"\n"},
		Source{Name: "broken", Rego: "package broken\n\ndeny contains \"x\" if f == 3\n\nf := 1 if input.object.metadata.name\n\nf := 2 if input.object.metadata.name\n"},
	)
	reg := prometheus.NewRegistry()
	if err := e.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ml, other := twoJobs(nil), twoJobs(nil)
	other["metadata"] = map[string]any{"name": "train", "namespace": "other"}
	for _, obj := range []map[string]any{ml, other, other} {
		_, _ = e.Evaluate(ctx, Input{Operation: "CREATE", Object: obj})
	}
	want := `
# HELP inplace_policy_evaluations_total Evaluations of a policy on a JobSet (or, for target PodTemplates, on one of its Pod templates), by policy and outcome: allow, deny, warn, dryrun (what its messages did; deny if any denied) or error (the evaluation failed).
# TYPE inplace_policy_evaluations_total counter
inplace_policy_evaluations_total{outcome="allow",policy="deny-ml"} 2
inplace_policy_evaluations_total{outcome="deny",policy="deny-ml"} 1
inplace_policy_evaluations_total{outcome="error",policy="broken"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "inplace_policy_evaluations_total"); err != nil {
		t.Error(err)
	}
}

// TestInventoryWritesDoNotWaitForEvaluations: a slow policy's evaluation
// holds no lock that a write, or another evaluation after the write, waits
// for; each evaluation reads one snapshot whole.
func TestInventoryWritesDoNotWaitForEvaluations(t *testing.T) {
	const slow = "package slow\n\ndeny contains \"never\" if {\n\tcount(data.inventory.cluster) >= 0\n\tsome i in numbers.range(1, 1000000000)\n\ti < 0\n}\n"
	e := adminEngine(t, Source{Name: "slow", Rego: slow})
	e.SetLimits(Limits{PolicyTimeout: 2 * time.Second, TotalTimeout: 3 * time.Second})
	ctx := context.Background()
	done := make(chan struct{})
	reads := inventoryTxnIDs.Load()
	go func() {
		defer close(done)
		_, _ = e.Evaluate(ctx, Input{Operation: "CREATE", Object: twoJobs(nil)})
	}()
	// The slow evaluation has begun its read of the inventory.
	for deadline := time.Now().Add(time.Second); inventoryTxnIDs.Load() == reads; {
		if time.Now().After(deadline) {
			t.Fatal("the slow evaluation never read the inventory")
		}
		runtime.Gosched()
	}
	begin := time.Now()
	for i := range 100 {
		if err := e.Inventory().Put(ctx, InventoryObject{APIVersion: "v1", Kind: "Namespace", Name: fmt.Sprint("ns-", i), Object: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(begin); took > 500*time.Millisecond {
		t.Errorf("100 writes took %v beside a slow evaluation, want them not to wait for it", took)
	}
	select {
	case <-done:
		t.Fatal("the slow evaluation ended before the writes: the test proves nothing")
	default:
	}
	<-done
}

func TestInventoryLeavesNothingOfDeletedNamespaces(t *testing.T) {
	inv := NewInventory(0)
	ctx := context.Background()
	if err := inv.Put(ctx, InventoryObject{APIVersion: "v1", Kind: "ConfigMap", Namespace: "gone", Name: "a", Object: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if err := inv.Delete(ctx, "v1", "ConfigMap", "gone", "a"); err != nil {
		t.Fatal(err)
	}
	txn, _ := inv.NewTransaction(ctx)
	v, err := inv.Read(ctx, txn, storage.Path{"inventory"})
	if err != nil {
		t.Fatal(err)
	}
	if got := v.(ast.Value).String(); got != `{"cluster": {}, "namespace": {}}` {
		t.Errorf("inventory %s, want the namespace removed with its last object", got)
	}
}

func TestCanRefuse(t *testing.T) {
	for rego, want := range map[string]bool{
		"package p\n\ndeny contains \"no\" if true\n":                                             true,
		"package p\n\nviolation contains {\"msg\": \"no\"} if true\n":                             true,
		"package p\n\nwarn contains \"careful\" if true\n":                                        false,
		"package p\n\npatch contains {\"op\": \"add\", \"path\": \"/x\", \"value\": 1} if true\n": false,
	} {
		p, err := Compile(Source{Name: "p", Rego: rego})
		if err != nil {
			t.Fatalf("%s: %v", rego, err)
		}
		if got := p.CanRefuse(); got != want {
			t.Errorf("CanRefuse of\n%s= %v, want %v", rego, got, want)
		}
	}
}
