package controller

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/coexist"
	ctrltestutil "github.com/inplace-dev/inplace/controller/internal/testutil"
)

// lagging answers dry-run status writes as a kube-apiserver that has not
// yet taken up the replaced CRD's schema does, pruning what upstream's
// lacks, until caughtUp; or fails them with err. It refuses a write that
// is not a dry run: the probe must never store anything.
type lagging struct {
	client.SubResourceWriter
	t *testing.T

	mu       sync.Mutex
	caughtUp bool
	err      error
	writes   int
}

func (l *lagging) Update(_ context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	var o client.SubResourceUpdateOptions
	o.ApplyOptions(opts)
	if len(o.DryRun) != 1 || o.DryRun[0] != "All" {
		l.t.Errorf("a status write that is not a dry run: dryRun %v", o.DryRun)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	if l.err != nil {
		return l.err
	}
	if js := obj.(*jobset.JobSet); !l.caughtUp {
		js.Status.InPlaceRestarts, js.Status.SyncedEpoch, js.Status.DeprecatedEpoch, js.Status.SyncedPods = 0, 0, 0, 0
	}
	return nil
}

func (l *lagging) set(caughtUp bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.caughtUp, l.err = caughtUp, err
}

func (l *lagging) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

// probedGate is a gate over our CRD with one JobSet, whose dry runs api
// answers.
func probedGate(t *testing.T) (*gateFixture, *lagging, *jobset.JobSet) {
	t.Helper()
	f := newGateFixture(t)
	api := &lagging{t: t}
	f.g.opts.StatusWriter = api
	js := ctrltestutil.JobSet("w", 1)
	if err := f.c.Create(f.ctx, js); err != nil {
		t.Fatal(err)
	}
	return f, api, js
}

// Upstream's Lease lapsed on our CRD, the gate resumes only once a status
// written keeps our fields: until then it holds, said on the CRD and in
// its readiness, not on each JobSet, and checks again within moments.
// The CRD once seen served is not probed again; a new version of it is.
func TestUpstreamGateWaitsForTheSchemaServed(t *testing.T) {
	f, api, js := probedGate(t)
	g := f.g
	key := client.ObjectKeyFromObject(js)

	f.holdLease()
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if g.admit(js, f.onJobs) {
		t.Fatal("upstream's Lease held: want the JobSet held back")
	}
	drain(f.onCRD)
	drain(f.onJobs)
	if api.count() != 0 {
		t.Errorf("upstream's Lease held: %d dry runs, want none while the verdict holds anyway", api.count())
	}

	f.clk.Step(16 * time.Second)
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if g.admit(js, f.onJobs) {
		t.Error("upstream's Lease lapsed, our schema not served yet: want the JobSet held back")
	}
	err := g.Check(nil)
	if err == nil || !strings.Contains(err.Error(), "still drops status.inPlaceRestarts, status.deprecatedEpoch, status.syncedEpoch, status.syncedPods") {
		t.Errorf("readiness %v, want it naming the fields the API server drops", err)
	}
	if !g.transient() {
		t.Error("want the hold to be checked again within moments")
	}
	if got := drain(f.onCRD); len(got) != 1 || !strings.HasPrefix(got[0], "Normal "+coexist.ReasonSchemaNotServed) {
		t.Errorf("Events on the CRD %q, want one Normal %s", got, coexist.ReasonSchemaNotServed)
	}
	if got := drain(f.onJobs); len(got) != 0 {
		t.Errorf("Events on the JobSet %q, want none for a hold of moments", got)
	}
	g.mu.Lock()
	parked := g.jobSets.keys[key]
	g.mu.Unlock()
	if !parked.warned {
		t.Error("a transient hold: the JobSet's warning was reset, to be warned again")
	}

	api.set(true, nil)
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	expectRequeued(t, f.jobSets, key, "our schema served")
	if !g.admit(js, f.onJobs) || g.Check(nil) != nil {
		t.Errorf("our schema served: want the gate open and ready; readiness %v", g.Check(nil))
	}
	if got := drain(f.onCRD); len(got) != 1 || !strings.HasPrefix(got[0], "Normal "+coexist.ReasonResumed) ||
		!strings.Contains(got[0], "was: the JobSet CRD "+coexist.CRDName+" keeps every status field") {
		t.Errorf("Events on the CRD %q, want one %s saying what it waited for", got, coexist.ReasonResumed)
	}
	writes := api.count()
	f.clk.Step(time.Minute)
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if api.count() != writes {
		t.Errorf("%d dry runs after the CRD was seen served, want none", api.count()-writes)
	}

	// The CRD changes again (applied anew, say): probed again.
	var crd apiextensionsv1.CustomResourceDefinition
	if err := f.c.Get(f.ctx, client.ObjectKey{Name: coexist.CRDName}, &crd); err != nil {
		t.Fatal(err)
	}
	crd.Annotations = map[string]string{"applied": "again"}
	if err := f.c.Update(f.ctx, &crd); err != nil {
		t.Fatal(err)
	}
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if api.count() != writes+1 {
		t.Errorf("%d dry runs after the CRD changed, want 1", api.count()-writes)
	}
}

// A hold for a schema not served that lasts past coexist.SchemaGrace is
// no longer transient: every JobSet held back is warned, and the checks go
// back to their interval.
func TestUpstreamGateSaysASchemaNotServedThatLasts(t *testing.T) {
	f, _, js := probedGate(t)
	g := f.g
	key := client.ObjectKeyFromObject(js)
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if g.admit(js, f.onJobs) || !g.transient() {
		t.Fatal("our schema not served: want a transient hold")
	}
	drain(f.onCRD)

	f.clk.Step(coexist.SchemaGrace)
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if g.transient() {
		t.Error("past the grace: want the hold no longer transient")
	}
	expectRequeued(t, f.jobSets, key, "the hold lasts")
	if g.admit(js, f.onJobs) {
		t.Error("past the grace: want the JobSet held back")
	}
	if got := drain(f.onJobs); len(got) != 1 || !strings.Contains(got[0], "Warning "+coexist.ReasonSchemaNotServed) || !strings.Contains(got[0], "It has not for 10s") {
		t.Errorf("Events on the JobSet %q, want one Warning %s saying for how long", got, coexist.ReasonSchemaNotServed)
	}
	if got := drain(f.onCRD); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+coexist.ReasonSchemaNotServed) {
		t.Errorf("Events on the CRD %q, want one Warning %s", got, coexist.ReasonSchemaNotServed)
	}
}

// A wait for the schema that another hold interrupted is counted anew
// when it comes again: transient again, not said on every JobSet at once.
func TestUpstreamGateCountsTheWaitForTheSchemaAnew(t *testing.T) {
	f, _, _ := probedGate(t)
	g := f.g
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if !g.transient() {
		t.Fatal("our schema not served: want a transient hold")
	}
	f.holdLease()
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.clk.Step(16 * time.Second) // the Lease lapses, long after the first wait began
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if !g.transient() {
		t.Errorf("the schema still not served after upstream's Lease lapsed: want a transient hold again; readiness %v", g.Check(nil))
	}
}

// With no JobSet there is nothing to write through: the gate runs, and
// probes at the next check, once there is one.
func TestUpstreamGateProbesOnceThereIsAJobSet(t *testing.T) {
	f := newGateFixture(t)
	g := f.g
	api := &lagging{t: t}
	g.opts.StatusWriter = api
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if g.Check(nil) != nil || api.count() != 0 {
		t.Fatalf("no JobSet: readiness %v, %d dry runs; want ready, none", g.Check(nil), api.count())
	}
	if err := f.c.Create(f.ctx, ctrltestutil.JobSet("w", 1)); err != nil {
		t.Fatal(err)
	}
	if err := g.check(f.ctx); err != nil {
		t.Fatal(err)
	}
	if g.Check(nil) == nil || api.count() != 1 {
		t.Errorf("a JobSet, our schema not served: readiness %v, %d dry runs; want held, 1", g.Check(nil), api.count())
	}
}

// A dry run the API server refuses cannot tell: the gate goes on the
// CRD's word, saying so on the CRD, rather than hold every JobSet; one
// that fails otherwise holds, transiently, saying why.
func TestUpstreamGateWhenTheProbeFails(t *testing.T) {
	for name, tc := range map[string]struct {
		err    error
		open   bool
		events []string
	}{
		"refused": {
			err: apierrors.NewInvalid(schema.GroupKind{Group: "jobset.x-k8s.io", Kind: "JobSet"}, "w", nil), open: true,
			events: []string{"Warning " + coexist.ReasonSchemaUnchecked},
		},
		"unavailable": {
			err: apierrors.NewServiceUnavailable("etcd"), open: false,
			events: []string{"Normal " + coexist.ReasonSchemaNotServed},
		},
	} {
		t.Run(name, func(t *testing.T) {
			f, api, _ := probedGate(t)
			g := f.g
			api.set(false, tc.err)
			if err := g.check(f.ctx); err != nil {
				t.Fatalf("check: %v, want the probe's failure in the verdict, not a failed read", err)
			}
			if open := g.Check(nil) == nil; open != tc.open {
				t.Errorf("gate open %v, want %v (readiness %v)", open, tc.open, g.Check(nil))
			}
			got := drain(f.onCRD)
			if len(got) != len(tc.events) {
				t.Fatalf("Events on the CRD %q, want %q", got, tc.events)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.events[i]) || !strings.Contains(got[i], tc.err.Error()) {
					t.Errorf("Event %q, want %q with the API server's answer %q", got[i], tc.events[i], tc.err.Error())
				}
			}
		})
	}
}
