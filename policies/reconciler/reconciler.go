package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/jobsetpolicy"
)

// Reconciler compiles JobSetPolicies into the engine.
type Reconciler struct {
	client   client.Client
	engine   *policies.Engine
	recorder events.EventRecorder
	metrics  *Metrics
	// tracker learns of each policy loaded; nil tracks nothing.
	tracker *ReadyTracker
	// elected is closed once this replica leads (at once without leader
	// election): only the leader reports a policy's health, so that
	// replicas that see it differently never take turns writing it.
	elected <-chan struct{}
}

// Policies and namespaces are read from the cache; a namespace the cache
// has not seen yet is read past it (webhook.Options.APIReader). The
// reconciler updates a policy's status, the audit patches its findings.
// +kubebuilder:rbac:groups=policy.inplace.dev,resources=jobsetpolicies,verbs=list;watch
// +kubebuilder:rbac:groups=policy.inplace.dev,resources=jobsetpolicies/status,verbs=update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// The audit reads JobSets from the cache; it never writes one.
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=list;watch
// The policies' Events (a policy failing, a violation in dry run); patch
// counts one again when the same version of a JobSet is admitted again (a
// no-op update, a retried request).
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup registers the reconciler on every replica.
// tracker, if not nil, learns of each policy loaded.
func Setup(mgr ctrl.Manager, engine *policies.Engine, metrics *Metrics, tracker *ReadyTracker) error {
	r := &Reconciler{client: mgr.GetClient(), engine: engine, recorder: mgr.GetEventRecorder("inplace-policy"), metrics: metrics, tracker: tracker, elected: mgr.Elected()}
	// A policy that starts or stops failing its evaluations is reconciled
	// so that its Ready condition says so. The engine calls this on the
	// admission path: it must not block, and a change dropped when the
	// queue is full is seen at the policy's next reconcile.
	healthChanges := make(chan event.TypedGenericEvent[*policyv1alpha1.JobSetPolicy], 256)
	engine.OnHealthChange(func(name string) {
		select {
		case healthChanges <- event.TypedGenericEvent[*policyv1alpha1.JobSetPolicy]{Object: &policyv1alpha1.JobSetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}}:
		default:
		}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("jobsetpolicy").
		For(&policyv1alpha1.JobSetPolicy{}).
		WatchesRawSource(source.Channel(healthChanges, &handler.TypedEnqueueRequestForObject[*policyv1alpha1.JobSetPolicy]{})).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}

// Reconcile compiles one policy and puts it in force if it compiles.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p policyv1alpha1.JobSetPolicy
	if err := r.client.Get(ctx, req.NamespacedName, &p); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.engine.RemovePolicy(req.Name)
			r.tracker.Observed(req.Name)
			log.FromContext(ctx).Info("policy removed")
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if p.DeletionTimestamp != nil {
		r.engine.RemovePolicy(p.Name)
		r.tracker.Observed(p.Name)
		return ctrl.Result{}, nil
	}
	// Whatever follows, the engine holds what of this policy is in force.
	defer r.tracker.Observed(p.Name)

	status := p.Status.DeepCopy()
	status.ObservedGeneration = p.Generation
	// A generation that compiled and is in force already is not compiled
	// again: a reconcile for a health change, a status write or a resync
	// only reports.
	current := r.engine.InForce(p.Name, string(p.UID), p.Generation)
	nsLabels := r.namespaceLabels(ctx)
	var compiled *policies.Policy
	var err error
	if !current {
		compiled, err = jobsetpolicy.Compile(p.Name, &p.Spec, nsLabels, r.engine)
	}
	if err != nil {
		status.Errors = strings.Split(strings.TrimSpace(err.Error()), "\n")
		// The last version that compiled, as the status keeps it for
		// every replica: one that started after the bad edit enforces what
		// the others do.
		msg := "the rego does not compile, and status.inForce records no version that did: nothing of this policy is in force"
		if status.InForce != nil {
			if lastGood, lerr := jobsetpolicy.Compile(p.Name, status.InForce, nsLabels, r.engine); lerr != nil {
				// The version in force no longer compiles either (a newer
				// policy engine, say): nothing of it can be enforced.
				r.engine.RemovePolicy(p.Name)
				msg = fmt.Sprintf("the rego does not compile, nor does generation %d in status.inForce any more (%v): nothing of this policy is in force", status.InForceGeneration, lerr)
			} else {
				lastGood.UID, lastGood.Generation = string(p.UID), status.InForceGeneration
				r.engine.SetPolicy(lastGood)
				msg = fmt.Sprintf("the rego does not compile; generation %d, the last that compiled (status.inForce), stays in force", status.InForceGeneration)
			}
		} else {
			r.engine.RemovePolicy(p.Name)
		}
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: policyv1alpha1.ReasonCompileError,
			Message: msg, ObservedGeneration: p.Generation,
		})
		r.metrics.countCompileError(p.Name)
	} else {
		// Always from the spec this replica read, never skipped on what the
		// shared status says: another replica may have written it. The same
		// generation keeps what the engine learned of its evaluations.
		if !current {
			compiled.UID, compiled.Generation = string(p.UID), p.Generation
			r.engine.SetPolicy(compiled)
		}
		status.Errors = nil
		status.InForce, status.InForceGeneration = p.Spec.DeepCopy(), p.Generation
		meta.SetStatusCondition(&status.Conditions, r.readyCondition(&p))
	}
	return r.writeStatus(ctx, &p, status)
}

// writeStatus writes status if it changed, with the Events of its
// changes, and requeues a failing policy.
func (r *Reconciler) writeStatus(ctx context.Context, p *policyv1alpha1.JobSetPolicy, status *policyv1alpha1.JobSetPolicyStatus) (ctrl.Result, error) {
	var result ctrl.Result
	ready := meta.FindStatusCondition(status.Conditions, policyv1alpha1.ConditionReady)
	failing := ready != nil && ready.Reason == policyv1alpha1.ReasonEvaluationFailing
	if failing {
		// A health change the engine could not queue is seen here.
		result.RequeueAfter = time.Minute
	}
	if equality.Semantic.DeepEqual(&p.Status, status) {
		return result, nil
	}
	before := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionReady)
	p.Status = *status
	if err := r.client.Status().Update(ctx, p); err != nil {
		return ctrl.Result{}, err
	}
	if len(status.Errors) > 0 {
		r.recorder.Eventf(p, nil, corev1.EventTypeWarning, policyv1alpha1.ReasonCompileError, "Compile", "%s", strings.Join(status.Errors, "; "))
	}
	if failing && (before == nil || before.Reason != policyv1alpha1.ReasonEvaluationFailing) {
		r.recorder.Eventf(p, nil, corev1.EventTypeWarning, policyv1alpha1.ReasonEvaluationFailing, "Evaluate", "%s", ready.Message)
	}
	return result, nil
}

// leading reports whether this replica reports health.
func (r *Reconciler) leading() bool {
	if r.elected == nil {
		return true
	}
	select {
	case <-r.elected:
		return true
	default:
		return false
	}
}

// readyCondition is the Ready condition of a policy that compiled: True,
// unless its evaluations on the leader replica keep failing. A replica
// that does not lead, or has not evaluated the policy yet, has nothing to
// say about its health and keeps what was written of this generation.
func (r *Reconciler) readyCondition(p *policyv1alpha1.JobSetPolicy) metav1.Condition {
	h := r.engine.Health(p.Name)
	if !r.leading() {
		// Only the leader says how the evaluations go; keep what it wrote.
		h = policies.Health{}
	}
	if h.Failing {
		return metav1.Condition{
			Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: policyv1alpha1.ReasonEvaluationFailing,
			Message: fmt.Sprintf("in force with enforcementAction %s, but its last evaluations failed (%s): %s; a Deny policy that cannot decide denies, so fix or remove it",
				jobsetpolicy.Action(&p.Spec), h.Reason, h.Message),
			ObservedGeneration: p.Generation,
		}
	}
	if cur := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionReady); cur != nil && !h.Evaluated &&
		cur.Reason == policyv1alpha1.ReasonEvaluationFailing && cur.ObservedGeneration == p.Generation {
		return *cur
	}
	return metav1.Condition{
		Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: policyv1alpha1.ReasonCompiled,
		Message:            fmt.Sprintf("in force with enforcementAction %s", jobsetpolicy.Action(&p.Spec)),
		ObservedGeneration: p.Generation,
	}
}

// namespaceLabels returns a lookup of namespace labels from the cache, for
// namespace selectors.
func (r *Reconciler) namespaceLabels(ctx context.Context) func(string) labels.Set {
	return func(ns string) labels.Set {
		var n corev1.Namespace
		if err := r.client.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
			return nil
		}
		return n.Labels
	}
}
