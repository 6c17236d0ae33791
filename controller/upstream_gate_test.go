package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/config/crd"
	"github.com/inplace-dev/inplace/controller/coexist"
	ctrltestutil "github.com/inplace-dev/inplace/controller/internal/testutil"
)

// The gate holds reconciles back while upstream's Lease is held, warns
// each JobSet once, and lets every JobSet it held back through once the
// Lease lapses; a read that fails keeps it closed.
func TestUpstreamGate(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var ours apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(crd.JobSet, &ours); err != nil {
		t.Fatal(err)
	}
	failLeases := false
	c := gateClient(t, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*coordinationv1.Lease); ok && failLeases {
			return errors.New("leases is forbidden")
		}
		return c.Get(ctx, key, obj, opts...)
	}}, &ours)
	recorder := events.NewFakeRecorder(20)
	reg := prometheus.NewRegistry()
	g, err := NewUpstreamGate(c, recorder, UpstreamGateOptions{Clock: clk, Interval: time.Second, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	resumed := make(chan types.NamespacedName, 10)
	go func() {
		for e := range g.resume {
			resumed <- client.ObjectKeyFromObject(e.Object)
		}
	}()
	js := ctrltestutil.JobSet("w", 1)

	drain := func() []string {
		var out []string
		for {
			select {
			case e := <-recorder.Events:
				out = append(out, e)
			default:
				return out
			}
		}
	}

	if g.admit(js, recorder) || g.Check(nil) == nil {
		t.Error("before its first check: want the gate closed and not ready")
	}
	g.check(ctx)
	if got := <-resumed; got != client.ObjectKeyFromObject(js) {
		t.Errorf("after the first check: resumed %v, want the JobSet reconciled before it", got)
	}
	if !g.admit(js, recorder) || g.Check(nil) != nil {
		t.Errorf("our CRD, no upstream Lease: want the gate open and ready; readiness %v", g.Check(nil))
	}
	if got := drain(); len(got) != 0 {
		t.Errorf("our CRD, no upstream Lease: want no Event, got %q", got)
	}

	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: coexist.UpstreamNamespace, Name: coexist.UpstreamLeaseNames[0]},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("jobset-controller-manager-7d9f-x2x4q_1b2c"),
			LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime:            ptr.To(metav1.NewMicroTime(clk.Now())),
		},
	}
	if err := c.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
	g.check(ctx)
	// Reconciled twice: held back both times, warned once.
	if first, second := g.admit(js, recorder), g.admit(js, recorder); first || second {
		t.Error("upstream's Lease held: want the JobSet held back")
	}
	if err := g.Check(nil); err == nil || !strings.Contains(err.Error(), "upstream JobSet's controller is running") {
		t.Errorf("upstream's Lease held: readiness %v, want it naming upstream's controller", err)
	}
	got := drain()
	if len(got) != 2 || !strings.HasPrefix(got[0], "Warning "+coexist.ReasonUpstreamRunning) || !strings.Contains(got[1], "this JobSet is not reconciled") {
		t.Errorf("upstream's Lease held: Events %q, want one on the CRD and one on the JobSet, however often it is reconciled", got)
	}
	if v := testutil.ToFloat64(g.upstreamGauge); v != 1 {
		t.Errorf("inplace_upstream_jobset_controller_detected = %v, want 1", v)
	}

	clk.Step(16 * time.Second)
	g.check(ctx)
	if got := <-resumed; got != client.ObjectKeyFromObject(js) {
		t.Errorf("upstream's Lease lapsed: resumed %v, want the JobSet held back", got)
	}
	if !g.admit(js, recorder) || g.Check(nil) != nil {
		t.Error("upstream's Lease lapsed: want the gate open and ready")
	}
	if got := drain(); len(got) != 1 || !strings.HasPrefix(got[0], "Normal "+coexist.ReasonResumed) {
		t.Errorf("upstream's Lease lapsed: Events %q, want one %s on the CRD", got, coexist.ReasonResumed)
	}
	if v := testutil.ToFloat64(g.heldGauge) + testutil.ToFloat64(g.upstreamGauge); v != 0 {
		t.Errorf("gauges sum to %v after the Lease lapsed, want 0", v)
	}

	failLeases = true
	g.check(ctx)
	if g.admit(js, recorder) {
		t.Error("a Lease that cannot be read: want the gate closed")
	}
	if err := g.Check(nil); err == nil || !strings.Contains(err.Error(), "leases is forbidden") {
		t.Errorf("a Lease that cannot be read: readiness %v, want the error", err)
	}
}

func gateClient(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) client.WithWatch {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{coordinationv1.AddToScheme, apiextensionsv1.AddToScheme, jobset.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
}
