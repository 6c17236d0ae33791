package controller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/inplace-dev/inplace/config/crd"
	"github.com/inplace-dev/inplace/controller/coexist"
	ctrltestutil "github.com/inplace-dev/inplace/controller/internal/testutil"
)

// fakeUpstreamCache is the watch's view of the CRD and the Leases: a store
// of its own, apart from the API server's, that can go stale or fail.
type fakeUpstreamCache struct {
	c       client.Client
	changed chan struct{}

	mu    sync.Mutex
	err   error
	reads int
}

func (c *fakeUpstreamCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	err := c.err
	c.reads++
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.c.Get(ctx, key, obj, opts...)
}

func (c *fakeUpstreamCache) Changed() <-chan struct{} { return c.changed }

func (c *fakeUpstreamCache) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

func (c *fakeUpstreamCache) readCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// newWatchedGateFixture is a gate fixture whose gate has a watch, which
// starts out agreeing with the API server: our CRD, no upstream Lease.
func newWatchedGateFixture(t *testing.T) (*gateFixture, *fakeUpstreamCache) {
	t.Helper()
	f := newGateFixture(t)
	var ours apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(crd.JobSet, &ours); err != nil {
		t.Fatal(err)
	}
	cache := &fakeUpstreamCache{c: gateClient(t, interceptor.Funcs{}, &ours), changed: make(chan struct{}, 1)}
	g, err := NewUpstreamGate(f.c, f.onCRD, UpstreamGateOptions{Clock: f.clk, Metrics: prometheus.NewRegistry(), Watch: cache})
	if err != nil {
		t.Fatal(err)
	}
	f.g = g
	f.jobSets, f.grants = forward(g.jobSets.requeue), forward(g.grants.requeue)
	return f, cache
}

func heldLease(now time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: coexist.UpstreamNamespace, Name: coexist.UpstreamLeaseNames[0]},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("jobset-controller-manager-7d9f-x2x4q_1b2c"),
			LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime:            ptr.To(metav1.NewMicroTime(now)),
		},
	}
}

// The watch serves the checks while it agrees that the controller may
// run; a hold ends only on the API server's word, so that a watch gone
// stale while upstream's controller renews its Lease cannot let ours run
// beside it.
func TestUpstreamGateEndsAHoldOnlyOnTheAPIServersWord(t *testing.T) {
	f, cache := newWatchedGateFixture(t)
	g := f.g
	js := ctrltestutil.JobSet("w", 1)

	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	metadata, _ := f.reads()
	if metadata != 1 || !g.admit(js, f.onJobs) {
		t.Fatalf("first check: %d reads of the API server, gate open %v; want 1 (it ends the first hold) and open", metadata, g.admit(js, f.onJobs))
	}
	for range 3 {
		if err := g.check(f.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if metadata, _ := f.reads(); metadata != 1 || cache.readCount() == 0 {
		t.Errorf("checks of an open gate: %d reads of the API server in all, %d of the watch; want none more of the API server", metadata, cache.readCount())
	}

	// The watch sees upstream take its Lease: held at once.
	if err := cache.c.Create(f.ctx, heldLease(f.clk.Now())); err != nil {
		t.Fatal(err)
	}
	f.holdLease()
	before, _ := f.reads()
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if g.admit(js, f.onJobs) {
		t.Fatal("the watch sees upstream's Lease held: want the gate closed")
	}
	if after, _ := f.reads(); after != before {
		t.Errorf("a hold taken on the watch's word read the API server %d times, want none", after-before)
	}

	// The watch goes stale: its Lease is never renewed and reads as
	// lapsed, while upstream renews it on the API server.
	f.clk.Step(16 * time.Second)
	var live coordinationv1.Lease
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(heldLease(f.clk.Now())), &live); err != nil {
		t.Fatal(err)
	}
	live.Spec.RenewTime = ptr.To(metav1.NewMicroTime(f.clk.Now()))
	if err := f.c.Update(f.ctx, &live); err != nil {
		t.Fatal(err)
	}
	before, _ = f.reads()
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if after, _ := f.reads(); after != before+1 || g.admit(js, f.onJobs) {
		t.Errorf("a stale watch would end the hold: %d reads of the API server, gate open %v; want 1 read and the gate closed", after-before, g.admit(js, f.onJobs))
	}
	if err := g.Check(nil); err == nil || !strings.Contains(err.Error(), "upstream JobSet's controller is running") {
		t.Errorf("readiness %v, want it naming upstream's controller", err)
	}
}

// A watch that fails hands the check to the API server: no Event says
// the reads fail while the API server answers.
func TestUpstreamGateReadsTheAPIServerWhenTheWatchFails(t *testing.T) {
	f, cache := newWatchedGateFixture(t)
	g := f.g
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	drain(f.onCRD)
	cache.fail(errors.New("watching Lease: connection refused"))
	before, _ := f.reads()
	for range 2 {
		if err := g.check(f.ctx); err != nil {
			t.Fatalf("the watch fails, the API server answers: %v", err)
		}
	}
	if after, _ := f.reads(); after != before+2 {
		t.Errorf("%d reads of the API server in 2 checks with the watch failing, want 2", after-before)
	}
	if got := drain(f.onCRD); len(got) != 0 {
		t.Errorf("Events %q, want none: the API server answered", got)
	}
	if !g.admit(ctrltestutil.JobSet("w", 1), f.onJobs) {
		t.Error("want the gate open")
	}
}

// The gate goes on the watch's word alone for gateFreshInterval at most.
func TestUpstreamGateReadsTheAPIServerEveryFreshInterval(t *testing.T) {
	f, _ := newWatchedGateFixture(t)
	g := f.g
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	before, _ := f.reads()
	f.clk.Step(gateFreshInterval - time.Second)
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if after, _ := f.reads(); after != before {
		t.Errorf("%d reads of the API server within the interval, want none", after-before)
	}
	f.clk.Step(time.Second)
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if after, _ := f.reads(); after != before+1 {
		t.Errorf("%d reads of the API server once the interval passed, want 1", after-before)
	}
}

// A deletion waits for the API server's word, even right after a check
// from the watch.
func TestDeletionsDoNotTakeTheWatchsWord(t *testing.T) {
	f, cache := newWatchedGateFixture(t)
	g := f.g
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if g.verdictFresh {
		t.Fatal("the second check should have read the watch only")
	}
	// Upstream's controller took its Lease, which the watch has not
	// seen yet.
	f.holdLease()
	before := cache.readCount()
	ok, err := g.admitFresh(f.ctx, ctrltestutil.JobSet("w", 1), f.onJobs)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Error("upstream's Lease held on the API server: want the deletion held back")
	}
	if cache.readCount() != before {
		t.Error("admitFresh read the watch, want the API server only")
	}
}

// A change the watch sees is checked at once, not at the next interval.
func TestUpstreamGateChecksOnAChange(t *testing.T) {
	f, cache := newWatchedGateFixture(t)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.g.Start(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	ready := func(want bool) wait.ConditionWithContextFunc {
		return func(context.Context) (bool, error) { return (f.g.Check(nil) == nil) == want, nil }
	}
	// The first check, made at start, ends the first hold.
	if err := wait.PollUntilContextTimeout(f.ctx, 10*time.Millisecond, requeueWait, true, ready(true)); err != nil {
		t.Fatalf("after the first check: gate not ready: %v", f.g.Check(nil))
	}

	if err := cache.c.Create(f.ctx, heldLease(f.clk.Now())); err != nil {
		t.Fatal(err)
	}
	cache.changed <- struct{}{}
	if err := wait.PollUntilContextTimeout(f.ctx, 10*time.Millisecond, requeueWait, true, ready(false)); err != nil {
		t.Fatal("the watch saw upstream's Lease taken, the clock did not move: want the gate closed without waiting for the interval")
	}
}

// However long the interval, the gate reads the API server itself every
// gateFreshInterval.
func TestUpstreamGateStartReadsTheAPIServerEveryFreshInterval(t *testing.T) {
	f := newGateFixture(t)
	var ours apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(crd.JobSet, &ours); err != nil {
		t.Fatal(err)
	}
	cache := &fakeUpstreamCache{c: gateClient(t, interceptor.Funcs{}, &ours), changed: make(chan struct{}, 1)}
	g, err := NewUpstreamGate(f.c, f.onCRD, UpstreamGateOptions{Clock: f.clk, Metrics: prometheus.NewRegistry(), Watch: cache, Interval: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f.g = g
	forward(g.jobSets.requeue)
	forward(g.grants.requeue)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Start(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	reads := func(want int) wait.ConditionWithContextFunc {
		return func(context.Context) (bool, error) { n, _ := f.reads(); return n >= want, nil }
	}
	if err := wait.PollUntilContextTimeout(f.ctx, 10*time.Millisecond, requeueWait, true, reads(1)); err != nil {
		t.Fatal("the first check did not read the API server")
	}
	// Start waits on the fake clock: once it does, step it.
	if err := wait.PollUntilContextTimeout(f.ctx, 10*time.Millisecond, requeueWait, true, func(context.Context) (bool, error) { return f.clk.HasWaiters(), nil }); err != nil {
		t.Fatal("Start is not waiting")
	}
	f.clk.Step(gateFreshInterval)
	if err := wait.PollUntilContextTimeout(f.ctx, 10*time.Millisecond, requeueWait, true, reads(2)); err != nil {
		t.Fatalf("a 5m interval: no read of the API server %s after the last", gateFreshInterval)
	}
}
