package controller

import (
	"context"
	"errors"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/internal/testutil"
)

// failing makes every write of the RoleBinding name fail, as a conflict
// or a throttled request would.
func failing(name string) interceptor.Funcs {
	fail := func(o client.Object) error {
		if _, ok := o.(*rbacv1.RoleBinding); ok && o.GetName() == name {
			return errors.New("refused")
		}
		return nil
	}
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			if err := fail(o); err != nil {
				return err
			}
			return c.Create(ctx, o, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			if err := fail(o); err != nil {
				return err
			}
			return c.Update(ctx, o, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			if err := fail(o); err != nil {
				return err
			}
			return c.Delete(ctx, o, opts...)
		},
	}
}

func rbacClient(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{rbacv1.AddToScheme, jobset.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
}

// An agent's service account never holds the Pod grant without the
// restriction, and a running agent never loses its Pod rights, whichever
// write fails.
func TestAgentRBACOrder(t *testing.T) {
	ctx := context.Background()
	js := testutil.InPlaceJobSet(0, 0)
	js.Namespace = "ns"
	trainer := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: "ns"}
	oldRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: AgentRoleName, Namespace: "ns"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}, ResourceNames: []string{"x-epochs"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}},
	}}
	restricting := func(subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: AgentRoleName, Namespace: "ns"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: AgentRoleName}, Subjects: subjects}
	}
	granting := func(subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: AgentPodsBindingName, Namespace: "ns"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: AgentPodsClusterRole}, Subjects: subjects}
	}
	get := func(c client.Client, obj client.Object, name string) bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, obj) == nil
	}

	t.Run("an upgrade whose grant cannot be written keeps the Role's Pod rules", func(t *testing.T) {
		c := rbacClient(t, failing(AgentPodsBindingName), js, oldRole.DeepCopy(), restricting(trainer))
		if err := syncAgentRBAC(ctx, c, "ns"); err == nil {
			t.Fatal("no error with the grant refused")
		}
		var role rbacv1.Role
		if !get(c, &role, AgentRoleName) || len(role.Rules) != 2 {
			t.Errorf("Role %v: narrowed before the grant that replaces its Pod rules exists", role.Rules)
		}
	})

	t.Run("the last JobSet gone: the grant goes before the restriction", func(t *testing.T) {
		c := rbacClient(t, failing(AgentPodsBindingName), oldRole.DeepCopy(), restricting(trainer), granting(trainer))
		if err := syncAgentRBAC(ctx, c, "ns"); err == nil {
			t.Fatal("no error with the grant's deletion refused")
		}
		if !get(c, &rbacv1.RoleBinding{}, AgentRoleName) {
			t.Error("the restriction was deleted while the grant stands")
		}
	})

	t.Run("a new service account: restricted before it is granted", func(t *testing.T) {
		c := rbacClient(t, failing(AgentRoleName), js)
		if err := syncAgentRBAC(ctx, c, "ns"); err == nil {
			t.Fatal("no error with the restriction refused")
		}
		if get(c, &rbacv1.RoleBinding{}, AgentPodsBindingName) {
			t.Error("the grant was written though the restriction could not be")
		}
	})

	t.Run("all writes through: both bindings name the accounts, the Role only the broadcasts", func(t *testing.T) {
		c := rbacClient(t, interceptor.Funcs{}, js, oldRole.DeepCopy(), restricting(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "gone", Namespace: "ns"}))
		if err := syncAgentRBAC(ctx, c, "ns"); err != nil {
			t.Fatal(err)
		}
		var r, g rbacv1.RoleBinding
		var role rbacv1.Role
		if !get(c, &r, AgentRoleName) || !get(c, &g, AgentPodsBindingName) || !get(c, &role, AgentRoleName) {
			t.Fatal("a binding or the Role is missing")
		}
		if !sameSubjects(r.Subjects, []rbacv1.Subject{trainer}) || !sameSubjects(g.Subjects, []rbacv1.Subject{trainer}) {
			t.Errorf("subjects: restricting %v, granting %v", r.Subjects, g.Subjects)
		}
		if len(role.Rules) != 1 || role.Rules[0].Resources[0] != "configmaps" {
			t.Errorf("Role rules %v", role.Rules)
		}
	})
}
