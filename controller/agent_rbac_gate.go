package controller

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/decide"
)

// observeAgentGrants reads, for an InPlaceRestart JobSet whose in-place
// restarts are on, whether its agents' grants name it, and when this
// controller started: decide holds its new Jobs back until they do, for
// at most decide.AgentGrantWait from then or from its creation.
func (r *Reconciler) observeAgentGrants(ctx context.Context, js *jobset.JobSet, obs *decide.Observed) error {
	obs.ControllerStarted = r.since
	if !jobset.InPlaceActive(js) {
		return nil
	}
	granted, err := agentsGranted(ctx, r.client, js)
	if err != nil {
		return fmt.Errorf("reading the agents' grants: %w", err)
	}
	obs.AgentGrantsMissing = !granted
	return nil
}

// agentsGranted says whether the agents' Role and Pod RoleBinding of js's
// namespace, as the cache holds them, name js's broadcast and every
// service account its Pods run as. The agent-rbac controller writes them
// when the JobSet appears; Pods that started before would have their
// first watch of the broadcast refused and wait out a retry's backoff
// behind their barrier.
func agentsGranted(ctx context.Context, c client.Reader, js *jobset.JobSet) (bool, error) {
	var role rbacv1.Role
	if err := c.Get(ctx, client.ObjectKey{Namespace: js.Namespace, Name: AgentRoleName}, &role, client.UnsafeDisableDeepCopy); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	broadcast := protocol.BroadcastName(js.Name)
	if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "configmaps") && slices.Contains(r.ResourceNames, broadcast)
	}) {
		return false, nil
	}
	// The Pod grant is written after the restriction that names the same
	// service accounts: when it names them, both do.
	var rb rbacv1.RoleBinding
	if err := c.Get(ctx, client.ObjectKey{Namespace: js.Namespace, Name: AgentPodsBindingName}, &rb, client.UnsafeDisableDeepCopy); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	for _, s := range agentSubjects(js) {
		if !slices.Contains(rb.Subjects, s) {
			return false, nil
		}
	}
	return true, nil
}

// newJobSetsOfNamespace maps a change of the agents' grants to the
// InPlaceRestart JobSets of its namespace young enough to be waiting for
// them (decide.AgentGrantWait), so that their Jobs are created as soon as
// the grants name them.
func (r *Reconciler) newJobSetsOfNamespace() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list jobset.JobSetList
		if err := r.client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		now := r.opts.Clock.Now()
		var reqs []reconcile.Request
		for i := range list.Items {
			js := &list.Items[i]
			if jobset.InPlaceActive(js) && decide.AgentGrantWaitLeft(js, r.since, now) > 0 {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(js)})
			}
		}
		return reqs
	})
}
