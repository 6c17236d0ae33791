package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/internal/testutil"
)

func TestAgentGrants(t *testing.T) {
	withAccount := func(js *jobset.JobSet, name, serviceAccount string) jobset.JobSet {
		js.Name = name
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.ServiceAccountName = serviceAccount
		return *js
	}
	a := withAccount(testutil.InPlaceJobSet(0, 0), "a", "trainer")
	b := withAccount(testutil.InPlaceJobSet(0, 0), "b", "") // the namespace's default
	shared := withAccount(testutil.InPlaceJobSet(0, 0), "c", "trainer")
	recreate := withAccount(testutil.JobSet("workers", 1), "r", "other")
	deleting := withAccount(testutil.InPlaceJobSet(0, 0), "d", "leaving")
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	disabled := withAccount(testutil.InPlaceJobSet(0, 0), "e", "upstream")
	disabled.Annotations = map[string]string{jobset.DisableInPlaceRestartKey: ""}

	broadcasts, subjects := agentGrants([]jobset.JobSet{a, b, shared, recreate, deleting, disabled})
	if diff := cmp.Diff([]string{"a-epochs", "b-epochs", "c-epochs"}, broadcasts); diff != "" {
		t.Errorf("broadcasts (-want +got):\n%s", diff)
	}
	want := []rbacv1.Subject{
		{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: a.Namespace},
		{Kind: rbacv1.ServiceAccountKind, Name: "trainer", Namespace: a.Namespace},
	}
	if diff := cmp.Diff(want, subjects); diff != "" {
		t.Errorf("subjects (-want +got):\n%s", diff)
	}
	if broadcasts, subjects := agentGrants(nil); broadcasts != nil || subjects != nil {
		t.Errorf("no JobSet: %v %v", broadcasts, subjects)
	}
}

func TestSameSubjects(t *testing.T) {
	a := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "a", Namespace: "ns"}
	b := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "b", Namespace: "ns"}
	if !sameSubjects([]rbacv1.Subject{a, b}, []rbacv1.Subject{b, a}) {
		t.Errorf("the same subjects in another order differ")
	}
	if sameSubjects([]rbacv1.Subject{a}, []rbacv1.Subject{a, b}) {
		t.Errorf("different subjects are the same")
	}
}
