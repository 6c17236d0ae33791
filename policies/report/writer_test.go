package report

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// fakeClient is a client that knows the PolicyReport kind only if
// installed (answering a list as the manager's client does without the
// CRD), and records the writes; failIn fails every write in that
// namespace.
func fakeClient(installed bool, failIn string, writes *[]string, objs ...client.Object) client.Client {
	record := func(verb string, obj client.Object) error {
		*writes = append(*writes, verb+" "+obj.GetNamespace())
		if obj.GetNamespace() == failIn {
			return errors.New("refused")
		}
		return nil
	}
	return fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if !installed {
					return &meta.NoKindMatchError{GroupKind: GroupVersion.WithKind("PolicyReport").GroupKind(), SearchedVersions: []string{"v1alpha2"}}
				}
				return c.List(ctx, list, opts...)
			},
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if err := record("create", obj); err != nil {
					return err
				}
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if err := record("update", obj); err != nil {
					return err
				}
				return c.Update(ctx, obj, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				if err := record("delete", obj); err != nil {
					return err
				}
				return c.Delete(ctx, obj, opts...)
			},
		}).Build()
}

func report(ns, name string, labelled bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"summary": map[string]any{"pass": int64(1)}}}
	u.SetGroupVersionKind(GroupVersion.WithKind("PolicyReport"))
	u.SetNamespace(ns)
	u.SetName(name)
	if labelled {
		u.SetLabels(map[string]string{ManagedByLabel: ManagedBy})
	}
	return u
}

func TestWriterWritesWhatChanged(t *testing.T) {
	ctx := context.Background()
	var writes []string
	c := fakeClient(true, "", &writes,
		report("gone", ReportName, true),      // no JobSet left: deleted
		report("theirs", ReportName, false),   // not ours: left alone
		report("kept", "someone-elses", true)) // not our name: left alone
	clock := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	w := &Writer{Client: c, Clock: clock, Metrics: m}
	results := func(msg string) *Results {
		r := &Results{}
		r.Add(Result{Policy: "p", Action: "Deny", JobSet: JobSet{Namespace: "a", Name: "js"}, Outcome: Fail, Message: msg},
			Result{Policy: "p", Action: "Deny", JobSet: JobSet{Namespace: "b", Name: "js"}, Outcome: Pass})
		return r
	}
	if err := w.Write(ctx, results("m")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"create a", "create b", "delete gone"}, writes); diff != "" {
		t.Errorf("first writes (-want +got):\n%s", diff)
	}

	writes = nil
	clock.SetTime(time.Unix(2000, 0))
	if err := w.Write(ctx, results("m")); err != nil {
		t.Fatal(err)
	}
	if len(writes) != 0 {
		t.Errorf("the same results wrote %v", writes)
	}

	if err := w.Write(ctx, results("changed")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"update a"}, writes); diff != "" {
		t.Errorf("writes of a changed result (-want +got):\n%s", diff)
	}
	var b unstructured.Unstructured
	b.SetGroupVersionKind(GroupVersion.WithKind("PolicyReport"))
	if err := c.Get(ctx, client.ObjectKey{Namespace: "b", Name: ReportName}, &b); err != nil {
		t.Fatal(err)
	}
	results2, _, _ := unstructured.NestedSlice(b.Object, "results")
	if got, _, _ := unstructured.NestedInt64(results2[0].(map[string]any), "timestamp", "seconds"); got != 1000 {
		t.Errorf("b's unchanged result has timestamp %d, want the first audit's, 1000", got)
	}
	for _, name := range []string{ReportName, "someone-elses"} {
		ns := map[string]string{ReportName: "theirs", "someone-elses": "kept"}[name]
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &b); err != nil {
			t.Errorf("%s/%s, not the audit's, is gone: %v", ns, name, err)
		}
	}
	for result, want := range map[string]float64{"created": 2, "updated": 1, "deleted": 1, "error": 0} {
		if got := testutil.ToFloat64(m.writes.WithLabelValues(result)); got != want {
			t.Errorf("inplace_policy_report_writes_total{result=%q} = %v, want %v", result, got, want)
		}
	}
	if got := testutil.ToFloat64(m.enabled); got != 1 {
		t.Errorf("inplace_policy_reports_enabled = %v, want 1", got)
	}
}

func TestWriterGoesOnPastAFailedNamespace(t *testing.T) {
	var writes []string
	w := &Writer{Client: fakeClient(true, "a", &writes)}
	r := &Results{}
	for _, ns := range []string{"a", "b", "c"} {
		r.Add(Result{Policy: "p", Action: "Deny", JobSet: JobSet{Namespace: ns, Name: "js"}, Outcome: Pass})
	}
	err := w.Write(context.Background(), r)
	if err == nil || !strings.Contains(err.Error(), "namespace a") {
		t.Errorf("error %v, want one naming namespace a", err)
	}
	if diff := cmp.Diff([]string{"create a", "create b", "create c"}, writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

func TestWriterWithoutTheCRD(t *testing.T) {
	var writes []string
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	w := &Writer{Client: fakeClient(false, "", &writes), Metrics: m}
	r := &Results{}
	r.Add(Result{Policy: "p", Action: "Deny", JobSet: JobSet{Namespace: "a", Name: "js"}, Outcome: Pass})
	if err := w.Write(context.Background(), r); err != nil {
		t.Errorf("no CRD: %v, want no error", err)
	}
	if len(writes) != 0 {
		t.Errorf("no CRD, yet wrote %v", writes)
	}
	if got := testutil.ToFloat64(m.enabled); got != 0 {
		t.Errorf("inplace_policy_reports_enabled = %v, want 0", got)
	}
}
