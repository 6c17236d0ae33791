package controller

import (
	"context"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// AgentRBACControllerName names the agents' grants controller in logs and
// metrics.
const AgentRBACControllerName = "agent-rbac"

// agentRBACReconciler keeps the agents' Role and RoleBinding of each
// namespace in line with its InPlaceRestart JobSets. It is apart from the
// JobSet controller: the grants are the namespace's, shared by its JobSets,
// so one request per namespace (named after the Role) serves them all, and
// a JobSet's reconcile, on the restart path, sends no RBAC request.
type agentRBACReconciler struct {
	client client.Client
	// gate, if set, holds the grants back as it holds the JobSet
	// controller: upstream's InPlaceRestart JobSets are not ours to grant
	// to while upstream's controller runs.
	gate *UpstreamGate
}

// agentGrantObjects selects the agents' Role and RoleBindings by name.
var agentGrantObjects = predicate.NewPredicateFuncs(func(o client.Object) bool {
	return o.GetName() == AgentRoleName || o.GetName() == AgentPodsBindingName
})

// setupAgentRBAC registers the agents' grants controller with mgr; it
// syncs up to workers namespaces at once (one namespace's requests never
// run at once), since new InPlaceRestart JobSets' Jobs wait for it. While
// gate holds, it syncs nothing.
func setupAgentRBAC(mgr ctrl.Manager, workers int, gate *UpstreamGate) error {
	r := &agentRBACReconciler{client: mgr.GetClient(), gate: gate}
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: AgentRoleName}}}
	})
	b := ctrl.NewControllerManagedBy(mgr)
	if gate != nil {
		// The namespaces the gate held back, once it lets them through.
		b = b.WatchesRawSource(source.Channel(gate.grants.requeue, &handler.EnqueueRequestForObject{}))
	}
	return b.
		Named(AgentRBACControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		For(&rbacv1.Role{}, builder.WithPredicates(agentGrantObjects)).
		Watches(&rbacv1.RoleBinding{}, toNamespace, builder.WithPredicates(agentGrantObjects)).
		// What the grants depend on: which JobSets exist, their restart
		// strategy, the annotation that turns in-place restarts off, the
		// Pods' service accounts. Status updates change none of it.
		Watches(&jobset.JobSet{}, toNamespace, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Complete(r)
}

// Reconcile syncs the agents' grants of the request's namespace.
func (r *agentRBACReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.gate != nil && !r.gate.admitGrants(req.NamespacedName) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, syncAgentRBAC(ctx, r.client, req.Namespace)
}

// syncAgentRBAC makes the agents' Role and RoleBindings of namespace grant
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
func syncAgentRBAC(ctx context.Context, c client.Client, namespace string) error {
	var jobSets jobset.JobSetList
	if err := c.List(ctx, &jobSets, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	broadcasts, subjects := agentGrants(jobSets.Items)
	key := client.ObjectKey{Namespace: namespace, Name: AgentRoleName}
	var role rbacv1.Role
	roleErr := c.Get(ctx, key, &role)
	if client.IgnoreNotFound(roleErr) != nil {
		return roleErr
	}
	// restricting is the agents' admission policy's parameter (its name
	// must not change): every service account it names is held to its own
	// Pod's epoch. granting gives them the Pod rights of the ClusterRole.
	// A service account is named by restricting before granting names it,
	// and after granting stops: it never holds the grant unrestricted, nor
	// when a write between the two fails.
	restricting := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: AgentRoleName, Namespace: namespace, Labels: map[string]string{ManagedByLabel: "inplace"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: AgentRoleName},
	}
	granting := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: AgentPodsBindingName, Namespace: namespace, Labels: map[string]string{ManagedByLabel: "inplace"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: AgentPodsClusterRole},
	}

	if len(subjects) == 0 {
		// The grant first, then the restriction, then the Role: a deletion
		// that failed stops the rest and is tried again by the next
		// reconcile.
		if err := deleteIfPresent(ctx, c, &rbacv1.RoleBinding{}, client.ObjectKeyFromObject(granting)); err != nil {
			return err
		}
		if err := deleteIfPresent(ctx, c, &rbacv1.RoleBinding{}, client.ObjectKeyFromObject(restricting)); err != nil {
			return err
		}
		if roleErr == nil {
			log.FromContext(ctx).Info("no InPlaceRestart JobSet left in the namespace: deleted the agents' RoleBindings; deleting their Role")
			return deleteAsRead(ctx, c, &role)
		}
		return nil
	}

	// A missing Role first: the apiserver refuses a binding to a Role
	// that does not exist (it cannot check that the binder holds its
	// rights), and a new Role grants no Pod right.
	rules := agentRules(broadcasts)
	if apierrors.IsNotFound(roleErr) {
		if err := c.Create(ctx, agentRole(namespace, broadcasts)); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}

	// 1. The restriction names whom it names now and whom the grant will
	// name; 2. the grant names whom it should; 3. the restriction too.
	stored, err := syncBinding(ctx, c, restricting, func(current []rbacv1.Subject) []rbacv1.Subject {
		return withSubjects(current, subjects)
	})
	if err != nil {
		return err
	}
	if _, err := syncBinding(ctx, c, granting, func([]rbacv1.Subject) []rbacv1.Subject { return subjects }); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if !sameSubjects(stored.Subjects, subjects) {
		// The object just written, not the cache's: it may not show the
		// write yet.
		stored.Subjects = subjects
		if err := c.Update(ctx, stored); err != nil {
			return err
		}
	}

	// An existing Role last: one that an earlier version made with the
	// Pod rules in it is narrowed only once the grant that replaces them
	// is there, so that a running agent never loses its Pod rights.
	if roleErr == nil && !equality.Semantic.DeepEqual(role.Rules, rules) {
		role.Rules = rules
		if err := c.Update(ctx, &role); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// syncBinding creates want with the subjects subjectsFor gives for none,
// or updates the binding of its name to the subjects subjectsFor gives for
// its current ones, with the resourceVersion read, and returns the binding
// as stored.
func syncBinding(ctx context.Context, c client.Client, want *rbacv1.RoleBinding, subjectsFor func(current []rbacv1.Subject) []rbacv1.Subject) (*rbacv1.RoleBinding, error) {
	var rb rbacv1.RoleBinding
	err := c.Get(ctx, client.ObjectKeyFromObject(want), &rb)
	switch {
	case apierrors.IsNotFound(err):
		created := want.DeepCopy()
		created.Subjects = subjectsFor(nil)
		return created, c.Create(ctx, created)
	case err != nil:
		return nil, err
	}
	if subjects := subjectsFor(rb.Subjects); !sameSubjects(rb.Subjects, subjects) {
		rb.Subjects = subjects
		return &rb, c.Update(ctx, &rb)
	}
	return &rb, nil
}

// deleteIfPresent deletes the object of key as the cache shows it.
func deleteIfPresent(ctx context.Context, c client.Client, obj client.Object, key client.ObjectKey) error {
	if err := c.Get(ctx, key, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	return deleteAsRead(ctx, c, obj)
}

// deleteAsRead deletes obj with its UID and resourceVersion as
// preconditions: an object changed since it was read is decided again.
func deleteAsRead(ctx context.Context, c client.Client, obj client.Object) error {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	return client.IgnoreNotFound(c.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv}))
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
