package controller

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/coexist"
	ctrltestutil "github.com/inplace-dev/inplace/controller/internal/testutil"
)

// lagging answers dry-run status writes as a kube-apiserver that has not
// yet taken up the replaced CRD's schema does, pruning what upstream's
// lacks, until caughtUp.
type lagging struct {
	client.SubResourceWriter

	mu       sync.Mutex
	caughtUp bool
	writes   int
}

func (l *lagging) Update(_ context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	if js := obj.(*jobset.JobSet); !l.caughtUp {
		js.Status.InPlaceRestarts, js.Status.SyncedEpoch, js.Status.DeprecatedEpoch, js.Status.SyncedPods = 0, 0, 0, 0
	}
	return nil
}

func (l *lagging) catchUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.caughtUp = true
}

func (l *lagging) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

// Upstream's Lease lapsed on our CRD, the gate resumes only once a status
// written keeps our fields: until then it holds, said on the CRD and in
// its readiness, not on each JobSet, and checks again within moments.
// The CRD once seen served is not probed again.
func TestUpstreamGateWaitsForTheSchemaServed(t *testing.T) {
	f := newGateFixture(t)
	g := f.g
	api := &lagging{}
	g.opts.StatusWriter = api
	js := ctrltestutil.JobSet("w", 1)
	if err := f.c.Create(f.ctx, js); err != nil {
		t.Fatal(err)
	}
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
	if !g.passing() {
		t.Error("want the hold to be checked again within moments")
	}
	if got := drain(f.onCRD); len(got) != 1 || !strings.HasPrefix(got[0], "Normal "+coexist.ReasonSchemaNotServed) {
		t.Errorf("Events on the CRD %q, want one Normal %s", got, coexist.ReasonSchemaNotServed)
	}
	if got := drain(f.onJobs); len(got) != 0 {
		t.Errorf("Events on the JobSet %q, want none for a hold of moments", got)
	}

	api.catchUp()
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
}
