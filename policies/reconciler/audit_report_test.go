package reconciler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/jobsetpolicy"
	"github.com/inplace-dev/inplace/policies/report"
)

const (
	teamRego  = "package team\n\ndeny contains \"the JobSet has no label team\" if {\n\tnot input.object.metadata.labels.team\n}\n"
	ownerRego = "package owner\n\ndeny contains \"the JobSet has no label owner\" if {\n\tnot input.object.metadata.labels.owner\n}\n"
)

func auditScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := jobset.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := policyv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func jobSetPolicy(name, rego string, action policyv1alpha1.EnforcementAction) *policyv1alpha1.JobSetPolicy {
	return &policyv1alpha1.JobSetPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       policyv1alpha1.JobSetPolicySpec{Rego: rego, EnforcementAction: action},
	}
}

func engineWith(t *testing.T, ps ...*policyv1alpha1.JobSetPolicy) *policies.Engine {
	t.Helper()
	names, _ := policies.BuiltinNames()
	e, err := policies.NewEngine(names)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		compiled, err := jobsetpolicy.Compile(p.Name, &p.Spec, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.SetPolicy(compiled)
	}
	return e
}

func testJobSet(ns, name string, labels map[string]string) *jobset.JobSet {
	return &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Labels: labels}}
}

// reportOutcomes reads a namespace's PolicyReport as "policy jobset
// result" lines and its summary; nil if there is none.
func reportOutcomes(t *testing.T, c client.Client, ns string) ([]string, map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(report.GroupVersion.WithKind("PolicyReport"))
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: report.ReportName}, u); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, nil
		}
		t.Fatal(err)
	}
	results, _, _ := unstructured.NestedSlice(u.Object, "results")
	var out []string
	for _, r := range results {
		m := r.(map[string]any)
		res, _, _ := unstructured.NestedSlice(m, "resources")
		action, _, _ := unstructured.NestedString(m, "properties", "enforcementAction")
		out = append(out, fmt.Sprintf("%s %s %s %s", m["policy"], res[0].(map[string]any)["name"], m["result"], action))
	}
	summary, _, _ := unstructured.NestedMap(u.Object, "summary")
	return out, summary
}

func TestAuditWritesReports(t *testing.T) {
	ctx := context.Background()
	team, owner := jobSetPolicy("team", teamRego, ""), jobSetPolicy("owner", ownerRego, policyv1alpha1.Warn)
	c := fake.NewClientBuilder().WithScheme(auditScheme(t)).WithStatusSubresource(&policyv1alpha1.JobSetPolicy{}).
		WithObjects(team, owner,
			testJobSet("a", "js-1", nil),
			testJobSet("a", "js-2", map[string]string{"team": "x", "owner": "y"}),
			testJobSet("b", "js-3", map[string]string{"team": "x"})).Build()
	clock := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	a := &Auditor{Client: c, Engine: engineWith(t, team, owner), Interval: time.Minute, Clock: clock, Workers: 2,
		Reports: &report.Writer{Client: c, Clock: clock}}
	if err := a.Audit(ctx); err != nil {
		t.Fatal(err)
	}
	got, summary := reportOutcomes(t, c, "a")
	want := []string{"owner js-1 warn Warn", "owner js-2 pass Warn", "team js-1 fail Deny", "team js-2 pass Deny"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results in a (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"pass": int64(2), "fail": int64(1), "warn": int64(1), "error": int64(0), "skip": int64(0)}, summary); diff != "" {
		t.Errorf("summary of a (-want +got):\n%s", diff)
	}
	got, _ = reportOutcomes(t, c, "b")
	if diff := cmp.Diff([]string{"owner js-3 warn Warn", "team js-3 pass Deny"}, got); diff != "" {
		t.Errorf("results in b (-want +got):\n%s", diff)
	}

	// Every policy gone: so are the reports.
	for _, p := range []*policyv1alpha1.JobSetPolicy{team, owner} {
		if err := c.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Audit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"a", "b"} {
		if got, _ := reportOutcomes(t, c, ns); got != nil {
			t.Errorf("namespace %s kept its report with no policy left: %v", ns, got)
		}
	}
}

// An audit out of time writes the policies' status, marked incomplete, and
// leaves the reports alone: the JobSets it did not reach would lose their
// results.
func TestIncompleteAuditLeavesTheReports(t *testing.T) {
	ctx := context.Background()
	slow := jobSetPolicy("slow", endless, "")
	objs := []client.Object{slow}
	for i := range 200 {
		objs = append(objs, testJobSet("ns", fmt.Sprintf("js-%d", i), nil))
	}
	c := fake.NewClientBuilder().WithScheme(auditScheme(t)).WithStatusSubresource(&policyv1alpha1.JobSetPolicy{}).WithObjects(objs...).Build()
	stale := &unstructured.Unstructured{}
	stale.SetGroupVersionKind(report.GroupVersion.WithKind("PolicyReport"))
	stale.SetNamespace("elsewhere")
	stale.SetName(report.ReportName)
	stale.SetLabels(map[string]string{report.ManagedByLabel: report.ManagedBy})
	if err := c.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}
	a := &Auditor{Client: c, Engine: failingEngine(t), Interval: time.Minute, Budget: 100 * time.Millisecond, Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0)),
		Workers: 2, Reports: &report.Writer{Client: c}}
	if err := a.Audit(ctx); err != nil {
		t.Fatal(err)
	}
	var p policyv1alpha1.JobSetPolicy
	if err := c.Get(ctx, client.ObjectKey{Name: "slow"}, &p); err != nil {
		t.Fatal(err)
	}
	if p.Status.Audit == nil || !p.Status.Audit.Incomplete {
		t.Errorf("status.audit %+v: want it written, incomplete", p.Status.Audit)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "elsewhere", Name: report.ReportName}, stale); err != nil {
		t.Errorf("an incomplete audit deleted a report: %v", err)
	}
	if got, _ := reportOutcomes(t, c, "ns"); got != nil {
		t.Errorf("an incomplete audit wrote a report: %v", got)
	}
}
