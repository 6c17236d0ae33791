package controller

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/decide"
	"github.com/inplace-dev/inplace/controller/internal/testutil"
	"github.com/inplace-dev/inplace/controller/state"
)

// The cache holds only the ConfigMaps the controller owns (the broadcast
// objects, labelled with their JobSet's name), not every ConfigMap of the
// cluster.
func TestCacheSelectsConfigMapsByLabel(t *testing.T) {
	var sel labels.Selector
	for obj, by := range CacheOptions().ByObject {
		if _, ok := obj.(*corev1.ConfigMap); ok {
			sel = by.Label
		}
	}
	if sel == nil {
		t.Fatal("the cache has no label selector for ConfigMaps: it would hold every ConfigMap of the cluster")
	}
	if !sel.Matches(labels.Set{jobset.JobSetNameKey: "train"}) {
		t.Errorf("selector %q does not select a broadcast ConfigMap", sel)
	}
	if sel.Matches(labels.Set{"app": "other"}) {
		t.Errorf("selector %q selects a ConfigMap that is not ours", sel)
	}
}

// observe gathers what Decide is given beyond the children: whether the
// agents' grants name the JobSet, when this controller started, and the
// restart an earlier reconcile held back (kept by record, of this
// JobSet's UID alone).
func TestObserveGathersWhatEarlierReconcilesLeft(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, rbacv1.AddToScheme, schedulingv1.AddToScheme, jobset.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	js := testutil.InPlaceJobSet(0, 0)
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.PriorityClassName = "high"
	js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.PriorityClassName = "gone"
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(js,
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
		// Two defaults, as a race may leave them: the lower counts.
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "default-b"}, Value: 20, GlobalDefault: true},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "default-a"}, Value: 10, GlobalDefault: true},
	).Build()
	r := &Reconciler{client: c, apiReader: c, children: state.NewChildIndex(), expectations: state.NewJobExpectations(), since: t0,
		opts: Options{Clock: clocktesting.NewFakePassiveClock(t0.Add(time.Minute)), FatalExitSettle: ptr.To(decide.DefaultFatalExitSettle)}}
	observe := func(js *jobset.JobSet) decide.Observed {
		t.Helper()
		obs, release, err := r.observe(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		release()
		return obs
	}

	obs := observe(js)
	if diff := cmp.Diff(decide.Priorities{"high": 1000}, obs.Priorities); diff != "" {
		t.Errorf("priorities of the named classes, an unknown one left out (-want +got):\n%s", diff)
	}
	noClass := js.DeepCopy()
	noClass.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.PriorityClassName = ""
	if got := observe(noClass).Priorities; got[""] != 10 {
		t.Errorf("priority of a template naming no class = %v, want the lowest globalDefault class's, 10", got[""])
	}
	if !obs.AgentGrantsMissing || !obs.ControllerStarted.Equal(t0) || !obs.RestartHeldSince.IsZero() {
		t.Errorf("first reconcile: grants missing %t, controller started %v, restart held since %v; want true, %v, none", obs.AgentGrantsMissing, obs.ControllerStarted, obs.RestartHeldSince, t0)
	}
	if err := syncAgentRBAC(ctx, c, js.Namespace); err != nil {
		t.Fatal(err)
	}
	r.record(ctx, js, &decide.Plan{RestartHeldSince: t0})
	obs = observe(js)
	if obs.AgentGrantsMissing || !obs.RestartHeldSince.Equal(t0) {
		t.Errorf("next reconcile: grants missing %t, restart held since %v; want false, %v", obs.AgentGrantsMissing, obs.RestartHeldSince, t0)
	}

	recreated := js.DeepCopy()
	recreated.UID = "uid-2"
	if obs := observe(recreated); !obs.RestartHeldSince.IsZero() {
		t.Errorf("a JobSet recreated under the name: restart held since %v, want none of its predecessor's", obs.RestartHeldSince)
	}
	r.record(ctx, js, &decide.Plan{})
	if obs := observe(js); !obs.RestartHeldSince.IsZero() {
		t.Errorf("the hold over: restart held since %v, want none", obs.RestartHeldSince)
	}
}
