package controller

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/config/crd"
	"github.com/inplace-dev/inplace/controller/coexist"
	"github.com/inplace-dev/inplace/controller/decide"
	ctrltestutil "github.com/inplace-dev/inplace/controller/internal/testutil"
)

// requeueWait bounds the wait for a request the gate sends back: the
// check sends it before it returns, so only a regression waits this long.
const requeueWait = 10 * time.Second

// gateFixture is a gate over a fake API server holding our CRD, with
// reads that can be made to fail, Events on the CRD and on JobSets apart,
// and the requests the gate sends back.
type gateFixture struct {
	t       *testing.T
	ctx     context.Context
	clk     *clocktesting.FakeClock
	c       client.WithWatch
	g       *UpstreamGate
	onCRD   *events.FakeRecorder
	onJobs  *events.FakeRecorder
	jobSets chan types.NamespacedName
	grants  chan types.NamespacedName

	mu sync.Mutex
	// fail makes every read fail with it.
	fail error
	// metadataReads and crdReads count the CRD's reads, of its metadata
	// and in full.
	metadataReads, crdReads int
}

func newGateFixture(t *testing.T) *gateFixture {
	t.Helper()
	var ours apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(crd.JobSet, &ours); err != nil {
		t.Fatal(err)
	}
	f := &gateFixture{
		t:      t,
		ctx:    context.Background(),
		clk:    clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)),
		onCRD:  events.NewFakeRecorder(100),
		onJobs: events.NewFakeRecorder(100),
	}
	f.c = gateClient(t, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		f.mu.Lock()
		fail := f.fail
		switch obj.(type) {
		case *metav1.PartialObjectMetadata:
			f.metadataReads++
		case *unstructured.Unstructured:
			f.crdReads++
		}
		f.mu.Unlock()
		if fail != nil {
			return fail
		}
		return c.Get(ctx, key, obj, opts...)
	}}, &ours)
	g, err := NewUpstreamGate(f.c, f.onCRD, UpstreamGateOptions{Clock: f.clk, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	f.g = g
	f.jobSets, f.grants = forward(g.jobSets.requeue), forward(g.grants.requeue)
	return f
}

// forward receives what the gate sends on ch, as the controller's watch
// would, and passes on the keys.
func forward(ch chan event.GenericEvent) chan types.NamespacedName {
	out := make(chan types.NamespacedName, 100)
	go func() {
		for e := range ch {
			out <- client.ObjectKeyFromObject(e.Object)
		}
	}()
	return out
}

func (f *gateFixture) failReads(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = err
}

func (f *gateFixture) reads() (metadata, full int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.metadataReads, f.crdReads
}

// holdLease makes upstream's controller hold its Lease, renewed now.
func (f *gateFixture) holdLease() {
	f.t.Helper()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: coexist.UpstreamNamespace, Name: coexist.UpstreamLeaseNames[0]},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("jobset-controller-manager-7d9f-x2x4q_1b2c"),
			LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime:            ptr.To(metav1.NewMicroTime(f.clk.Now())),
		},
	}
	if err := f.c.Create(f.ctx, lease); err != nil {
		f.t.Fatal(err)
	}
}

// expectRequeued waits for the gate to send key back on ch.
func expectRequeued(t *testing.T, ch chan types.NamespacedName, key types.NamespacedName, when string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != key {
			t.Errorf("%s: sent back %v, want %v", when, got, key)
		}
	case <-time.After(requeueWait):
		t.Fatalf("%s: %v not sent back within %v", when, key, requeueWait)
	}
}

// drain returns the Events recorded so far.
func drain(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// The gate holds reconciles back while upstream's Lease is held, warns
// each JobSet once, and lets every JobSet it held back through once the
// Lease lapses.
func TestUpstreamGate(t *testing.T) {
	f := newGateFixture(t)
	g := f.g
	js := ctrltestutil.JobSet("w", 1)
	key := client.ObjectKeyFromObject(js)

	if g.admit(js, f.onJobs) || g.Check(nil) == nil {
		t.Error("before its first check: want the gate closed and not ready")
	}
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	expectRequeued(t, f.jobSets, key, "after the first check")
	if !g.admit(js, f.onJobs) || g.Check(nil) != nil {
		t.Errorf("our CRD, no upstream Lease: want the gate open and ready; readiness %v", g.Check(nil))
	}
	if got := append(drain(f.onCRD), drain(f.onJobs)...); len(got) != 0 {
		t.Errorf("our CRD, no upstream Lease: want no Event, got %q", got)
	}

	f.holdLease()
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	// Reconciled twice: held back both times, warned once.
	if first, second := g.admit(js, f.onJobs), g.admit(js, f.onJobs); first || second {
		t.Error("upstream's Lease held: want the JobSet held back")
	}
	if err := g.Check(nil); err == nil || !strings.Contains(err.Error(), "upstream JobSet's controller is running") {
		t.Errorf("upstream's Lease held: readiness %v, want it naming upstream's controller", err)
	}
	if got := drain(f.onCRD); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+coexist.ReasonUpstreamRunning) {
		t.Errorf("upstream's Lease held: Events on the CRD %q, want one %s", got, coexist.ReasonUpstreamRunning)
	}
	if got := drain(f.onJobs); len(got) != 1 || !strings.Contains(got[0], "this JobSet is not reconciled") {
		t.Errorf("upstream's Lease held: Events on the JobSet %q, want one however often it is reconciled", got)
	}
	if v := testutil.ToFloat64(g.upstreamGauge); v != 1 {
		t.Errorf("inplace_upstream_jobset_controller_detected = %v, want 1", v)
	}

	f.clk.Step(16 * time.Second)
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	expectRequeued(t, f.jobSets, key, "upstream's Lease lapsed")
	if !g.admit(js, f.onJobs) || g.Check(nil) != nil {
		t.Error("upstream's Lease lapsed: want the gate open and ready")
	}
	if got := drain(f.onCRD); len(got) != 1 || !strings.HasPrefix(got[0], "Normal "+coexist.ReasonResumed) {
		t.Errorf("upstream's Lease lapsed: Events %q, want one %s on the CRD", got, coexist.ReasonResumed)
	}
	if v := testutil.ToFloat64(g.heldGauge) + testutil.ToFloat64(g.upstreamGauge); v != 0 {
		t.Errorf("gauges sum to %v after the Lease lapsed, want 0", v)
	}
}

// Reads that fail leave the verdict as it was for the grace, retried
// sooner, and say so once; past the grace the gate closes, warning the
// JobSets held back; reads that succeed again open it and send them back.
func TestUpstreamGateThroughFailedReads(t *testing.T) {
	f := newGateFixture(t)
	g := f.g
	js := ctrltestutil.JobSet("w", 1)
	key := client.ObjectKeyFromObject(js)
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}

	unavailable := errors.New("the server is currently unable to handle the request")
	f.failReads(unavailable)
	err := g.check(f.ctx)
	if err == nil {
		t.Fatal("a read that fails: check returned no error")
	}
	if got := g.next(err); got != gateRetryInterval {
		t.Errorf("after a failed read the next is in %v, want %v", got, gateRetryInterval)
	}
	if got := g.next(nil); got != DefaultUpstreamCheckInterval {
		t.Errorf("after a read the next is in %v, want %v", got, DefaultUpstreamCheckInterval)
	}
	f.clk.Step(coexist.ReadGrace - time.Second)
	if err := g.check(f.ctx); err == nil {
		t.Fatal("a read that fails again: check returned no error")
	}
	if !g.admit(js, f.onJobs) || g.Check(nil) != nil {
		t.Errorf("reads failing within the grace: want the gate open and ready; readiness %v", g.Check(nil))
	}
	if got := drain(f.onCRD); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+coexist.ReasonCheckFailing) || !strings.Contains(got[0], unavailable.Error()) {
		t.Errorf("reads failing within the grace: Events %q, want one %s, with the error, however often they fail", got, coexist.ReasonCheckFailing)
	}
	if v := testutil.ToFloat64(g.heldGauge); v != 0 {
		t.Errorf("inplace_jobset_controller_held = %v within the grace, want 0", v)
	}

	f.clk.Step(time.Second)
	if err := g.check(f.ctx); err == nil {
		t.Fatal("a read that fails past the grace: check returned no error")
	}
	if g.admit(js, f.onJobs) {
		t.Error("reads failing past the grace: want the gate closed")
	}
	if err := g.Check(nil); err == nil || !strings.Contains(err.Error(), unavailable.Error()) {
		t.Errorf("reads failing past the grace: readiness %v, want the error", err)
	}
	if got := drain(f.onCRD); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+coexist.ReasonCheckFailing) || !strings.Contains(got[0], "has failed for 10s") {
		t.Errorf("reads failing past the grace: Events on the CRD %q, want the hold", got)
	}
	if got := drain(f.onJobs); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+coexist.ReasonCheckFailing) {
		t.Errorf("reads failing past the grace: Events on the JobSet %q, want one %s", got, coexist.ReasonCheckFailing)
	}

	f.failReads(nil)
	f.clk.Step(gateRetryInterval)
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	expectRequeued(t, f.jobSets, key, "reads succeeding again")
	if !g.admit(js, f.onJobs) || g.Check(nil) != nil {
		t.Errorf("reads succeeding again: want the gate open and ready; readiness %v", g.Check(nil))
	}
	got := drain(f.onCRD)
	if len(got) != 2 || !strings.HasPrefix(got[0], "Normal "+coexist.ReasonCheckRecovered) || !strings.HasPrefix(got[1], "Normal "+coexist.ReasonResumed) {
		t.Errorf("reads succeeding again: Events %q, want %s, then %s", got, coexist.ReasonCheckRecovered, coexist.ReasonResumed)
	}

	// Failing again, but within the grace: the recovery alone is said.
	f.failReads(unavailable)
	if err := g.check(f.ctx); err == nil {
		t.Fatal("check returned no error")
	}
	f.failReads(nil)
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	got = drain(f.onCRD)
	if len(got) != 2 || !strings.HasPrefix(got[0], "Warning "+coexist.ReasonCheckFailing) || !strings.HasPrefix(got[1], "Normal "+coexist.ReasonCheckRecovered) {
		t.Errorf("a failure within the grace: Events %q, want %s, then %s and no %s", got, coexist.ReasonCheckFailing, coexist.ReasonCheckRecovered, coexist.ReasonResumed)
	}
}

// A first check that fails holds, but warns no JobSet until the failure
// outlasts the grace or a check finds a reason; the JobSets held back
// meanwhile are then sent back, to be warned.
func TestUpstreamGateFirstCheckFails(t *testing.T) {
	f := newGateFixture(t)
	g := f.g
	js := ctrltestutil.JobSet("w", 1)
	key := client.ObjectKeyFromObject(js)

	f.failReads(errors.New("connection refused"))
	if err := g.check(f.ctx); err == nil {
		t.Fatal("check returned no error")
	}
	if g.admit(js, f.onJobs) || g.Check(nil) == nil {
		t.Error("a first check that failed: want the gate closed and not ready")
	}
	if got := drain(f.onJobs); len(got) != 0 {
		t.Errorf("a first check that failed: Events on the JobSet %q, want none yet", got)
	}

	// Then upstream's controller is found running: the JobSet held back
	// is sent back, and its reconcile warns it.
	f.failReads(nil)
	f.holdLease()
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	expectRequeued(t, f.jobSets, key, "a check finding upstream's controller after one that failed")
	if g.admit(js, f.onJobs) {
		t.Error("upstream's Lease held: want the JobSet held back")
	}
	if got := drain(f.onJobs); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+coexist.ReasonUpstreamRunning) {
		t.Errorf("upstream's Lease held: Events on the JobSet %q, want one %s", got, coexist.ReasonUpstreamRunning)
	}
}

// Past the grace, a gate that never read anything holds for the failure:
// the JobSets held back are sent back to be warned.
func TestUpstreamGateFirstChecksFailPastTheGrace(t *testing.T) {
	f := newGateFixture(t)
	g := f.g
	js := ctrltestutil.JobSet("w", 1)
	f.failReads(errors.New("connection refused"))
	if err := g.check(f.ctx); err == nil {
		t.Fatal("check returned no error")
	}
	g.admit(js, f.onJobs)
	f.clk.Step(coexist.ReadGrace)
	if err := g.check(f.ctx); err == nil {
		t.Fatal("check returned no error")
	}
	expectRequeued(t, f.jobSets, client.ObjectKeyFromObject(js), "reads failing past the grace from the start")
	if g.admit(js, f.onJobs) {
		t.Error("want the JobSet held back")
	}
	if got := drain(f.onJobs); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+coexist.ReasonCheckFailing) {
		t.Errorf("Events on the JobSet %q, want one %s", got, coexist.ReasonCheckFailing)
	}
}

// The CRD, large, is read in full only when its metadata, read at every
// check, says it changed; a CRD replaced with upstream's holds the gate at
// the next check.
func TestUpstreamGateReadsTheCRDWhenItChanges(t *testing.T) {
	f := newGateFixture(t)
	g := f.g
	for range 3 {
		if err := g.check(f.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if metadata, full := f.reads(); metadata != 3 || full != 1 {
		t.Errorf("three checks of an unchanged CRD: %d reads of its metadata, %d in full; want 3, 1", metadata, full)
	}

	data, err := os.ReadFile("../test/testdata/upstream-jobset/crd/jobset.x-k8s.io_jobsets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var upstream, installed apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &upstream); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Get(f.ctx, client.ObjectKey{Name: coexist.CRDName}, &installed); err != nil {
		t.Fatal(err)
	}
	installed.Labels, installed.Spec = upstream.Labels, upstream.Spec
	if err := f.c.Update(f.ctx, &installed); err != nil {
		t.Fatal(err)
	}
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, full := f.reads(); full != 2 {
		t.Errorf("a check after the CRD changed: %d reads in full, want 2", full)
	}
	if err := g.Check(nil); err == nil || !strings.Contains(err.Error(), "is not inplace's") {
		t.Errorf("upstream's CRD: readiness %v, want it held for the CRD", err)
	}
}

// A reconcile that deletes reads again first: upstream's controller,
// started since the last check, holds it back, as do reads that fail,
// within the grace too; one that deletes nothing reads nothing.
func TestDeletionsWaitForAFreshCheck(t *testing.T) {
	f := newGateFixture(t)
	r := &Reconciler{recorder: f.onJobs, opts: Options{Gate: f.g}}
	js := ctrltestutil.JobSet("w", 1)
	if err := f.g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	deletes := &decide.Plan{DeleteJobs: []*batchv1.Job{{}}}

	metadata, _ := f.reads()
	if ok, err := r.admitDeletions(f.ctx, js, &decide.Plan{CreateJobs: []*batchv1.Job{{}}}); !ok || err != nil {
		t.Errorf("a plan that deletes nothing: admitted %v, %v; want admitted", ok, err)
	}
	if now, _ := f.reads(); now != metadata {
		t.Errorf("a plan that deletes nothing: %d reads, want none", now-metadata)
	}
	if ok, err := r.admitDeletions(f.ctx, js, deletes); !ok || err != nil {
		t.Errorf("our CRD, no upstream Lease: admitted %v, %v; want admitted", ok, err)
	}

	f.holdLease()
	if !f.g.admit(js, f.onJobs) {
		t.Fatal("before a check, the gate should still be open on the last verdict")
	}
	if ok, err := r.admitDeletions(f.ctx, js, deletes); ok || err != nil {
		t.Errorf("upstream's controller started since the last check: admitted %v, %v; want held back", ok, err)
	}
	if got := drain(f.onJobs); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+coexist.ReasonUpstreamRunning) {
		t.Errorf("Events on the JobSet %q, want one %s", got, coexist.ReasonUpstreamRunning)
	}
	if f.g.Check(nil) == nil {
		t.Error("the fresh check found upstream's controller: want the gate closed for everyone")
	}

	var lease coordinationv1.Lease
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: coexist.UpstreamNamespace, Name: coexist.UpstreamLeaseNames[0]}, &lease); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Delete(f.ctx, &lease); err != nil {
		t.Fatal(err)
	}
	if err := f.g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	expectRequeued(t, f.jobSets, client.ObjectKeyFromObject(js), "upstream's Lease gone")
	f.failReads(errors.New("etcdserver: request timed out"))
	if ok, err := r.admitDeletions(f.ctx, js, &decide.Plan{DeletePods: []decide.PodDeletion{{}}}); ok || err == nil {
		t.Errorf("reads failing: admitted %v, %v; want an error, the deletion not carried out", ok, err)
	}
	if !f.g.admit(js, f.onJobs) {
		t.Error("reads failing within the grace: want reconciles that delete nothing admitted")
	}
}

// While the gate holds, the agents' grants are not written, upstream's
// InPlaceRestart JobSets' included; the namespaces held back are synced
// once it opens.
func TestAgentGrantsWaitForTheGate(t *testing.T) {
	f := newGateFixture(t)
	js := ctrltestutil.InPlaceJobSet(0, 0)
	c := rbacClient(t, interceptor.Funcs{}, js)
	r := &agentRBACReconciler{client: c, gate: f.g}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: js.Namespace, Name: AgentRoleName}}

	f.holdLease()
	if err := f.g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(f.ctx, req); err != nil {
		t.Fatal(err)
	}
	var roles rbacv1.RoleList
	if err := c.List(f.ctx, &roles); err != nil {
		t.Fatal(err)
	}
	if len(roles.Items) != 0 {
		t.Errorf("held: %d Roles written, want none", len(roles.Items))
	}

	f.clk.Step(16 * time.Second)
	if err := f.g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	expectRequeued(t, f.grants, req.NamespacedName, "upstream's Lease lapsed")
	if _, err := r.Reconcile(f.ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.List(f.ctx, &roles); err != nil {
		t.Fatal(err)
	}
	if len(roles.Items) != 1 {
		t.Errorf("resumed: %d Roles, want the agents'", len(roles.Items))
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
