package controller

import (
	"context"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// syncAgentRBAC makes the agents' Role and RoleBinding of namespace grant
// what its InPlaceRestart JobSets need (agentGrants, over the JobSets the
// cache holds): created when missing, narrowed when a JobSet is gone, and
// deleted with the last one. The agents' admission policy restricts every
// service account the RoleBinding names, so it names no more than needed.
//
// Reads come from the cache: a reconcile that finds both in place sends no
// request. Writes carry the resourceVersion read, so two reconciles that
// change them at once do not lose a grant: one gets a conflict and runs
// again. A Role or RoleBinding deleted while the cache still shows it is
// put back by the reconcile its deletion triggers (the controller watches
// both).
func (r *Reconciler) syncAgentRBAC(ctx context.Context, namespace string) error {
	var jobSets jobset.JobSetList
	if err := r.client.List(ctx, &jobSets, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	broadcasts, subjects := agentGrants(jobSets.Items)
	key := client.ObjectKey{Namespace: namespace, Name: AgentRoleName}
	var role rbacv1.Role
	roleErr := r.client.Get(ctx, key, &role)
	if client.IgnoreNotFound(roleErr) != nil {
		return roleErr
	}
	var rb rbacv1.RoleBinding
	rbErr := r.client.Get(ctx, key, &rb)
	if client.IgnoreNotFound(rbErr) != nil {
		return rbErr
	}

	if len(subjects) == 0 {
		// Each is deleted if it is there, whatever became of the other: a
		// deletion that failed is tried again by the next reconcile.
		if rbErr == nil {
			log.FromContext(ctx).Info("no InPlaceRestart JobSet left in the namespace: deleting the agents' RoleBinding and Role")
			if err := r.client.Delete(ctx, &rb, client.Preconditions{UID: &rb.UID, ResourceVersion: &rb.ResourceVersion}); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		if roleErr == nil {
			if err := r.client.Delete(ctx, &role, client.Preconditions{UID: &role.UID, ResourceVersion: &role.ResourceVersion}); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		return nil
	}

	rules := agentRules(broadcasts)
	switch {
	case apierrors.IsNotFound(roleErr):
		if err := r.client.Create(ctx, agentRole(namespace, broadcasts)); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	case !equality.Semantic.DeepEqual(role.Rules, rules):
		role.Rules = rules
		if err := r.client.Update(ctx, &role); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	switch {
	case apierrors.IsNotFound(rbErr):
		rb = rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: AgentRoleName, Namespace: namespace, Labels: map[string]string{ManagedByLabel: "inplace"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: AgentRoleName},
			Subjects:   subjects,
		}
		return ignore(r.client.Create(ctx, &rb), apierrors.IsAlreadyExists)
	case !sameSubjects(rb.Subjects, subjects):
		rb.Subjects = subjects
		return client.IgnoreNotFound(r.client.Update(ctx, &rb))
	}
	return nil
}

// sameSubjects reports whether two lists name the same subjects, in any
// order.
func sameSubjects(a, b []rbacv1.Subject) bool {
	order := func(x, y rbacv1.Subject) int {
		return strings.Compare(x.Kind+"/"+x.Namespace+"/"+x.Name, y.Kind+"/"+y.Namespace+"/"+y.Name)
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, order)
	slices.SortFunc(b, order)
	return slices.Equal(a, b)
}

// inPlaceJobSetsOf maps the agents' Role or RoleBinding to the
// InPlaceRestart JobSets of its namespace, whose reconciles keep it as they
// need it. With none (the last was deleted while no manager ran, say) it
// maps to a request under the Role's own name: its reconcile finds no such
// JobSet and syncs the namespace's grants, which deletes them.
func (r *Reconciler) inPlaceJobSetsOf(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetName() != AgentRoleName {
		return nil
	}
	var jobSets jobset.JobSetList
	if err := r.client.List(ctx, &jobSets, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing the JobSets whose agents' grants changed", "namespace", o.GetNamespace())
		return nil
	}
	var out []reconcile.Request
	for i := range jobSets.Items {
		if inPlace(&jobSets.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&jobSets.Items[i])})
		}
	}
	if len(out) == 0 {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: AgentRoleName}})
	}
	return out
}
