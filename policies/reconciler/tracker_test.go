package reconciler

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
)

func TestReadyTracker(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := policyv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	policy := func(name string) *policyv1alpha1.JobSetPolicy {
		return &policyv1alpha1.JobSetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(policy("a"), policy("b"), policy("c")).Build()
	tr := &ReadyTracker{Reader: reader}
	if tr.Ready() || tr.Check(nil) == nil {
		t.Fatal("ready before the policies were listed")
	}
	// Loaded before the list: it counts.
	tr.Observed("a")
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr.Observed("b")
	if tr.Ready() {
		t.Fatal("ready with c not loaded")
	}
	if err := tr.Check(nil); err == nil || err.Error() != "1 JobSetPolicies not loaded yet" {
		t.Errorf("check: %v", err)
	}
	tr.Observed("c")
	if !tr.Ready() || tr.Check(nil) != nil {
		t.Fatal("not ready with every policy loaded")
	}

	empty := &ReadyTracker{Reader: fake.NewClientBuilder().WithScheme(scheme).Build()}
	if err := empty.Start(context.Background()); err != nil || !empty.Ready() {
		t.Errorf("no policies: ready %v, err %v", empty.Ready(), err)
	}
	var none *ReadyTracker
	none.Observed("x") // a reconciler without a tracker
}
