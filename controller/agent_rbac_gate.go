package controller

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/decide"
)

// agentGrantWait bounds how long the Jobs of a new InPlaceRestart JobSet
// wait for its agents' grants. Past it they are created anyway, with a
// Warning: a grant that cannot be written (the manager's own RBAC, say)
// then shows as agents refused, not as a JobSet that never starts.
const agentGrantWait = 30 * time.Second

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
// them (agentGrantWait), so that their Jobs are created as soon as the
// grants name them.
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
			if jobset.InPlaceActive(js) && r.grantWaitLeft(js, now) > 0 {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(js)})
			}
		}
		return reqs
	})
}

// grantWaitLeft is how much longer js's Jobs may wait for its agents'
// grants: agentGrantWait from its creation or from this controller's
// start, whichever is later (a clock behind the apiserver's waits no
// longer than agentGrantWait).
func (r *Reconciler) grantWaitLeft(js *jobset.JobSet, now time.Time) time.Duration {
	from := js.CreationTimestamp.Time
	if r.since.After(from) {
		from = r.since
	}
	return agentGrantWait - max(now.Sub(from), 0)
}

// awaitAgentGrants holds back the Jobs of a new InPlaceRestart JobSet
// until its agents' grants name it (agentsGranted), for at most
// agentGrantWait from its creation or from this controller's start,
// whichever is later; the grants' change reconciles it again. It changes
// only what the plan creates. Jobs created suspended run no Pod, and wait
// for nothing; a resume is not held back, since the grants were written
// when the JobSet appeared (an agent refused retries with backoff).
func (r *Reconciler) awaitAgentGrants(ctx context.Context, js *jobset.JobSet, p *decide.Plan, now time.Time) error {
	if len(p.CreateJobs) == 0 || !jobset.InPlaceActive(js) || ptr.Deref(js.Spec.Suspend, false) {
		return nil
	}
	granted, err := agentsGranted(ctx, r.client, js)
	if err != nil || granted {
		return err
	}
	if left := r.grantWaitLeft(js, now); left > 0 {
		log.FromContext(ctx).V(1).Info("waiting for the agents' grants before creating Jobs", "left", left)
		p.CreateJobs = nil
		if p.RequeueAfter == 0 || p.RequeueAfter > left {
			p.RequeueAfter = left
		}
		return nil
	}
	r.recorder.Eventf(js, nil, corev1.EventTypeWarning, decide.ReasonAgentGrantsMissing, "Create",
		"the agents' Role %s and RoleBinding %s do not name this JobSet's broadcast and service accounts after %v: creating its Jobs anyway; its agents' requests will be refused until they do (see the manager's agent-rbac logs)",
		AgentRoleName, AgentPodsBindingName, agentGrantWait)
	return nil
}
