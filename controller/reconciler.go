package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/decide"
	"github.com/inplace-dev/inplace/controller/reports"
	"github.com/inplace-dev/inplace/controller/state"
)

// ControllerName names the controller in logs, metrics and Events.
const ControllerName = "jobset"

// Options tune the JobSet controller.
type Options struct {
	// MaxConcurrentReconciles is how many JobSets are reconciled at once.
	MaxConcurrentReconciles int
	// ChildParallelism bounds the concurrent creations and deletions of one
	// JobSet's children.
	ChildParallelism int
	// Clock is the time source; tests inject a fake one.
	Clock clock.PassiveClock
	// InPlaceRestartTimeout bounds an in-place restart; past it the JobSet
	// falls back to recreating its Jobs.
	InPlaceRestartTimeout time.Duration
	// UpdateBatchPeriod is how long the ordinary changes of a JobSet's Jobs
	// and Pods (counters, readiness, epochs reported) are gathered before
	// the JobSet is reconciled; failures are reconciled at once.
	UpdateBatchPeriod time.Duration
	// FatalExitSettle is how long an in-place restart of a JobSet whose
	// Jobs can fail by their podFailurePolicy waits for a fatal exit to be
	// reported; nil: decide.DefaultFatalExitSettle, 0: no wait.
	FatalExitSettle *time.Duration
	// Metrics is where the controller registers its metrics; nil means
	// controller-runtime's registry, which the manager's metrics endpoint
	// serves.
	Metrics prometheus.Registerer
	// Gate, if set, holds every reconcile back, the agents' grants
	// included, while upstream JobSet's controller runs or the JobSet CRD
	// would prune our status (upstream_gate.go); a reconcile that deletes
	// asks it again, on reads made then.
	Gate *UpstreamGate
	// Reports, if set, holds what agents report to the leader directly
	// (controller/reports); the controller reads every Pod with its
	// report (Store.Overlay).
	Reports *reports.Store
	// ReportEndpoint, if set, is broadcast to the agents: where they
	// report. Zero, they report on their Pods.
	ReportEndpoint protocol.ReportEndpoint
}

func (o *Options) complete() {
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 5
	}
	if o.ChildParallelism <= 0 {
		o.ChildParallelism = 50
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.InPlaceRestartTimeout <= 0 {
		o.InPlaceRestartTimeout = 5 * time.Minute
	}
	if o.UpdateBatchPeriod <= 0 {
		o.UpdateBatchPeriod = DefaultUpdateBatchPeriod
	}
	if o.FatalExitSettle == nil {
		o.FatalExitSettle = ptr.To(decide.DefaultFatalExitSettle)
	}
	if o.Metrics == nil {
		o.Metrics = ctrlmetrics.Registry
	}
	if o.Reports == nil {
		o.Reports = reports.NewStore()
	}
}

// Reconciler runs the lifecycle of JobSets.
type Reconciler struct {
	client client.Client
	// apiReader reads past the cache, for the rare object the cache's
	// label selector does not show.
	apiReader client.Reader
	recorder  events.EventRecorder
	opts      Options
	metrics   *restartMetrics
	// expectations are the Jobs created or deleted whose creation or
	// deletion the cache does not show yet.
	expectations *state.JobExpectations
	// children counts every JobSet's Jobs and Pods as their events come.
	children *state.ChildIndex
	// since is when this reconciler was made: a JobSet created while no
	// controller ran waits for its agents' grants from here, not from its
	// creation (Observed.ControllerStarted).
	since time.Time
	// sessions remembers, by JobSet, when its broadcast first showed this
	// leader's session (reportsSince).
	sessions sync.Map
	// queue is the controller's work queue, for reports, which come from
	// no informer (reportChanged).
	queue atomic.Pointer[workqueue.TypedRateLimitingInterface[reconcile.Request]]
	// held are the in-place restarts held back for a fatal exit
	// (Options.FatalExitSettle), by JobSet: observe reads them into the
	// next reconcile's Observed, record keeps the plan's.
	held state.Holds
	// countersHeld remembers, by JobSet, since when a change of its
	// counters alone has been held back while it recovers from an
	// in-place restart (decide.HoldCounters).
	countersHeld state.Holds
}

// writeStatusNow reports whether the plan's status is to be written over
// cur now. A change of counters alone while the JobSet recovers from an
// in-place restart (decide.HoldCounters) waits, from the first such change
// held, for what is left of decide.RecoveryHold: the plan is requeued at
// that, and the wait's start is kept in countersHeld. It is forgotten when
// nothing is to be written; the caller forgets it after a write.
func (r *Reconciler) writeStatusNow(key types.NamespacedName, effective *jobset.JobSet, cur jobset.JobSetStatus, p *decide.Plan, now time.Time) bool {
	if !decide.NeedsWrite(effective, cur, p.Status) {
		r.countersHeld.Forget(key) // nothing held
		return false
	}
	if !decide.HoldCounters(effective, cur, p.Status, now) {
		return true
	}
	since := r.countersHeld.Since(key, effective.UID)
	if since.IsZero() {
		since = now
		r.countersHeld.Record(key, effective.UID, since)
	}
	wait := decide.CountersWait(since, now)
	p.RequeueWithin(wait)
	return wait == 0
}

// The rights of the calls the controller makes, and no more: every read
// is from the cache (list and watch) except a broadcast ConfigMap's, which
// is read past it. The e2e suite compares these with the calls.
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=list;watch;delete
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets/status,verbs=update
// Child Jobs block their JobSet's deletion; with OwnerReferencesPermissionEnforcement that needs update on the finalizers subresource.
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=list;watch;create;patch;delete
// A resumed Job's start time is cleared so that its template may take what changed while it was suspended.
// +kubebuilder:rbac:groups=batch,resources=jobs/status,verbs=patch
// A Pod whose worker's exit fails its Job while its other containers run is deleted (stuckFatal).
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=list;watch;create;update;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=inplace-agent-pods
// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch;create
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;watch;create
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup registers the JobSet controller with mgr.
func Setup(mgr ctrl.Manager, opts Options) error {
	opts.complete()
	metrics, err := newRestartMetrics(opts.Metrics)
	if err != nil {
		return err
	}
	if err := setupAgentRBAC(mgr, opts.MaxConcurrentReconciles, opts.Gate); err != nil {
		return err
	}
	// The PriorityClasses' informer (priorities) starts with the cache, so
	// that a right missing shows when the manager starts, not as every
	// reconcile waiting without a deadline for the informer to sync.
	if _, err := mgr.GetCache().GetInformer(context.Background(), &schedulingv1.PriorityClass{}, cache.BlockUntilSynced(false)); err != nil {
		return fmt.Errorf("watching PriorityClasses: %w", err)
	}
	r := &Reconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), recorder: mgr.GetEventRecorder(ControllerName), opts: opts, metrics: metrics, expectations: state.NewJobExpectations(), children: state.NewChildIndex(), since: opts.Clock.Now()}
	opts.Reports.OnChange(r.reportChanged)
	b := ctrl.NewControllerManagedBy(mgr)
	if opts.Gate != nil {
		// The JobSets the gate held back, once it lets them through.
		b = b.WatchesRawSource(source.Channel(opts.Gate.jobSets.requeue, &handler.EnqueueRequestForObject{}))
	}
	return b.
		Named(ControllerName).
		For(&jobset.JobSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		// A claim deleted with whenDeleted Delete comes back at once.
		Owns(&corev1.PersistentVolumeClaim{}).
		// Jobs and Pods change many times per JobSet change: their handlers
		// reconcile failures at once and batch the rest.
		Watches(&batchv1.Job{}, batched(opts.UpdateBatchPeriod, jobSetOfJob, jobSignal, r.jobSetState, r.children.JobEvent)).
		// Pods matter to BlockingRecreate, which waits for the Pods of the
		// previous attempt to disappear, and to the epoch protocol.
		Watches(&corev1.Pod{}, batched(opts.UpdateBatchPeriod, jobSetOfPod, r.podSignal, r.jobSetState, r.recordPod)).
		// Reports change a Pod as its events do (reportChanged).
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			r.queue.Store(&q)
			return nil
		})).
		// A new InPlaceRestart JobSet's Jobs wait for its agents' grants.
		Watches(&rbacv1.Role{}, r.newJobSetsOfNamespace(), builder.WithPredicates(agentGrantObjects)).
		Watches(&rbacv1.RoleBinding{}, r.newJobSetsOfNamespace(), builder.WithPredicates(agentGrantObjects)).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}).
		Complete(r)
}

// jobSetState says whether the JobSet, as the cache holds it, restarts in
// place and whether it is restarting. Asked on the urgent Pod and Job
// events: it reads the cache's own object, without a copy.
func (r *Reconciler) jobSetState(key types.NamespacedName) jobSetState {
	var js jobset.JobSet
	if err := r.client.Get(context.Background(), key, &js, client.UnsafeDisableDeepCopy); err != nil {
		return jobSetState{}
	}
	return jobSetStateOf(&js)
}

// jobSetStateOf is what the event handlers read of js.
func jobSetStateOf(js *jobset.JobSet) jobSetState {
	active := jobset.InPlaceActive(js)
	return jobSetState{inPlace: active, restarting: active && jobset.RestartStateOf(js, &js.Status).InPlaceRestarting()}
}

// Reconcile brings one JobSet's children and status in line with its spec:
// get → skip → observe → decide (pure) → act → write status → emit Events.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var js jobset.JobSet
	if err := r.client.Get(ctx, req.NamespacedName, &js); err != nil {
		if apierrors.IsNotFound(err) {
			r.metrics.gone(req.NamespacedName)
			r.held.Forget(req.NamespacedName)
			r.sessions.Delete(req.NamespacedName)
			r.countersHeld.Forget(req.NamespacedName)
			r.expectations.Forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if js.DeletionTimestamp != nil {
		// Children go with the JobSet through their owner references.
		return ctrl.Result{}, nil
	}
	if m := ptr.Deref(js.Spec.ManagedBy, jobset.JobSetControllerName); m != jobset.JobSetControllerName {
		return ctrl.Result{}, nil
	}
	if r.opts.Gate != nil && !r.opts.Gate.admit(&js, r.recorder) {
		// Upstream's controller runs, or the CRD would prune our status:
		// no write to the JobSet or its children, only the gate's Event.
		return ctrl.Result{}, nil
	}
	if r.expectations.InTerminatingNamespace(req.NamespacedName, js.UID) {
		// The namespace controller deletes the JobSet with the rest.
		return ctrl.Result{}, nil
	}
	logger := log.FromContext(ctx).WithValues("restarts", js.Status.Restarts)
	ctx = log.IntoContext(ctx, logger)

	effective := js.DeepCopy()
	jobset.Default(effective)
	obs, release, err := r.observe(ctx, effective)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.opts.Clock.Now()
	p := func() decide.Plan {
		// Unlocked however decide returns: the JobSet's event handlers
		// wait on the lock. The plan's Jobs are the cache's objects, not
		// the family's: they outlive it.
		defer release()
		return decide.Decide(effective, obs, metav1.NewTime(now), decide.Timeouts{InPlaceRestart: r.opts.InPlaceRestartTimeout, FatalExitSettle: *r.opts.FatalExitSettle})
	}()
	r.record(ctx, &js, &p)
	if ok, err := r.admitDeletions(ctx, &js, &p); !ok || err != nil {
		return ctrl.Result{}, err
	}

	if err := r.act(ctx, &js, &p); err != nil {
		if namespaceTerminating(err) {
			// Nothing this reconcile decided can be carried out: no status
			// write that says otherwise.
			r.expectations.MarkTerminatingNamespace(req.NamespacedName, js.UID)
			logger.Info("namespace is being deleted: nothing more is created for this JobSet")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if p.DeleteJobSet {
		return ctrl.Result{}, nil
	}
	if r.writeStatusNow(req.NamespacedName, effective, js.Status, &p, now) {
		before := js.Status
		js.Status = p.Status
		// Update, not patch: the write carries the resourceVersion that was
		// read, so a decision taken on a stale JobSet (a restart counted
		// twice, say) fails with a conflict instead of landing.
		if err := r.client.Status().Update(ctx, &js); err != nil {
			return ctrl.Result{}, err
		}
		r.countersHeld.Forget(req.NamespacedName)
		r.metrics.written(effective, before, p.Status, now)
		if from, to := jobset.RestartStateOf(effective, &before), jobset.RestartStateOf(effective, &p.Status); from != to {
			logger.Info("restart state changed", "from", from, "to", to)
		}
		// A decision's Event follows the status write that carries it, at
		// once: a decision that was not written (held back, or decided
		// again on a status not yet updated) says nothing, and one that was
		// is said even if what follows fails.
		for _, e := range p.Events {
			r.recorder.Eventf(&js, nil, e.Type, e.Reason, e.Reason, "%s", e.Message)
		}
	}
	r.metrics.epochs(&js)
	r.metrics.imagePulls(&js)
	// The broadcast mirrors the status, which stays the truth: it is written
	// after the status, and rewritten by the next reconcile if this fails.
	if p.Broadcast != nil {
		if err := r.writeBroadcast(ctx, &js, p.Broadcast); err != nil {
			return ctrl.Result{}, fmt.Errorf("writing the broadcast: %w", err)
		}
	}
	for _, e := range p.Warnings {
		r.recorder.Eventf(&js, nil, e.Type, e.Reason, e.Reason, "%s", e.Message)
	}
	return ctrl.Result{RequeueAfter: p.RequeueAfter}, nil
}

// record keeps and says what the plan decided of its own waits, before
// anything of it is carried out and whatever follows: an in-place restart
// held back for a fatal exit (kept for the JobSet's next reconcile, which
// observe hands it), Jobs held back for the agents' grants, or created
// without them (a Warning, at every reconcile that creates Jobs so).
func (r *Reconciler) record(ctx context.Context, js *jobset.JobSet, p *decide.Plan) {
	logger := log.FromContext(ctx)
	r.held.Record(client.ObjectKeyFromObject(js), js.UID, p.RestartHeldSince)
	if !p.RestartHeldSince.IsZero() {
		logger.V(2).Info("in-place restart held back for a fatal exit to be reported", "since", p.RestartHeldSince, "settle", *r.opts.FatalExitSettle)
	}
	if p.AwaitingAgentGrants > 0 {
		logger.V(1).Info("waiting for the agents' grants before creating Jobs", "left", p.AwaitingAgentGrants)
	}
	if p.CreateWithoutAgentGrants {
		r.recorder.Eventf(js, nil, corev1.EventTypeWarning, decide.ReasonAgentGrantsMissing, "Create",
			"the agents' Role %s and RoleBinding %s do not name this JobSet's broadcast and service accounts after %v: creating its Jobs anyway; its agents' requests will be refused until they do (see the manager's agent-rbac logs)",
			AgentRoleName, AgentPodsBindingName, decide.AgentGrantWait)
	}
}

// admitDeletions asks the gate again, on reads made now, before a plan
// that deletes is carried out: what admitted this reconcile may be up to
// an interval old, and a deletion is not undone. Upstream's controller
// started since would fight over the Jobs; upstream's CRD applied again
// (by a GitOps tool, say) prunes our status fields, after which a JobSet
// restarted in place looks as on a later attempt than its Jobs, and the
// plan deletes them all. A plan that deletes nothing is carried out on the
// verdict admit gave.
func (r *Reconciler) admitDeletions(ctx context.Context, js *jobset.JobSet, p *decide.Plan) (bool, error) {
	if r.opts.Gate == nil || (len(p.DeleteJobs) == 0 && len(p.DeletePods) == 0 && !p.DeleteJobSet) {
		return true, nil
	}
	ok, err := r.opts.Gate.admitFresh(ctx, js, r.recorder)
	if err != nil {
		return false, fmt.Errorf("before deleting: %w", err)
	}
	if !ok {
		log.FromContext(ctx).Info("deletions not carried out: the JobSet controller is held", "jobs", len(p.DeleteJobs), "pods", len(p.DeletePods), "jobSet", p.DeleteJobSet)
	}
	return ok, nil
}

// act performs the plan's changes to children, in an order that is safe to
// repeat: every create uses a fixed name and tolerates AlreadyExists, every
// delete tolerates NotFound.
func (r *Reconciler) act(ctx context.Context, js *jobset.JobSet, p *decide.Plan) error {
	logger := log.FromContext(ctx)
	if err := r.forEach(ctx, p.DeleteJobs, func(ctx context.Context, job *batchv1.Job) error {
		// Foreground: the Job stays, and keeps its name taken, until its Pods
		// are gone, so that a recreated Job never overlaps the old Pods.
		err := r.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground),
			client.Preconditions{UID: &job.UID})
		if err == nil {
			r.expectations.Deleted(client.ObjectKeyFromObject(js), js.UID, job, r.opts.Clock.Now())
		}
		return ignore(err, apierrors.IsNotFound, apierrors.IsConflict)
	}); err != nil {
		return fmt.Errorf("deleting jobs: %w", err)
	}

	for _, d := range p.DeletePods {
		// The preconditions keep a decision taken on a stale cache from
		// deleting the Pod's replacement, or the Pod as it is now (restarted
		// in place since, under the same UID): a conflict says the Pod
		// changed, and its change brings the next reconcile.
		err := r.client.Delete(ctx, d.Pod, client.Preconditions{UID: &d.Pod.UID, ResourceVersion: &d.Pod.ResourceVersion})
		if err == nil {
			r.recorder.Eventf(js, d.Pod, d.Why.Type, d.Why.Reason, "Delete", "%s", d.Why.Message)
		}
		if err := ignore(err, apierrors.IsNotFound, apierrors.IsConflict); err != nil {
			return fmt.Errorf("deleting pod %s: %w", d.Pod.Name, err)
		}
	}

	if p.DeleteJobSet {
		logger.Info("deleting finished JobSet: ttlSecondsAfterFinished expired")
		r.recorder.Eventf(js, nil, corev1.EventTypeNormal, decide.ReasonTTLExpired, "Delete", "ttlSecondsAfterFinished expired")
		err := r.client.Delete(ctx, js, client.PropagationPolicy(metav1.DeletePropagationForeground),
			client.Preconditions{UID: &js.UID})
		return ignore(err, apierrors.IsNotFound)
	}

	if p.Service != nil {
		if err := r.client.Create(ctx, p.Service); err != nil && !apierrors.IsAlreadyExists(err) {
			if namespaceTerminating(err) {
				return err
			}
			r.recorder.Eventf(js, nil, corev1.EventTypeWarning, decide.ReasonServiceCreationFailed, "Create", "%v", err)
			return fmt.Errorf("creating headless service: %w", err)
		}
	}

	// Before the Jobs: a Pod whose claim does not exist yet cannot start.
	// A failed creation stops this pass before any Job is created.
	for _, pvc := range p.CreatePVCs {
		if err := r.client.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
			if namespaceTerminating(err) {
				return err
			}
			r.recorder.Eventf(js, nil, corev1.EventTypeWarning, decide.ReasonPVCCreationFailed, "Create", "volume claim %s: %v", pvc.Name, err)
			return fmt.Errorf("creating volume claim %s: %w", pvc.Name, err)
		}
	}

	// The first creation refused by a namespace being deleted stops the
	// others not sent yet; Reconcile records the refusal.
	var refused atomic.Bool
	if err := r.forEach(ctx, p.CreateJobs, func(ctx context.Context, job *batchv1.Job) error {
		if refused.Load() {
			return nil
		}
		err := r.client.Create(ctx, job)
		switch {
		case err == nil:
			r.expectations.Created(client.ObjectKeyFromObject(js), js.UID, job, r.opts.Clock.Now())
		case namespaceTerminating(err):
			refused.Store(true)
			return err
		case !apierrors.IsAlreadyExists(err):
			r.recorder.Eventf(js, nil, corev1.EventTypeWarning, decide.ReasonJobCreationFailed, "Create", "job %s: %v", job.Name, err)
			return err
		}
		return nil
	}); err != nil {
		return fmt.Errorf("creating jobs: %w", err)
	}

	if err := r.forEach(ctx, p.SuspendJobs, func(ctx context.Context, cached *batchv1.Job) error {
		patch := client.MergeFrom(cached)
		job := cached.DeepCopy() // the cache's object is read-only
		job.Spec.Suspend = ptr.To(true)
		return ignore(r.client.Patch(ctx, job, patch), apierrors.IsNotFound)
	}); err != nil {
		return fmt.Errorf("suspending jobs: %w", err)
	}
	if err := inParallel(ctx, r.opts.ChildParallelism, p.ResumeJobs, func(u decide.JobUpdate) string { return u.Cached.Name }, func(ctx context.Context, u decide.JobUpdate) error {
		return r.resume(ctx, js, u)
	}); err != nil {
		return fmt.Errorf("resuming jobs: %w", err)
	}
	return r.scale(ctx, js, p.ScaleJobs)
}

// resume unsuspends a Job with what its Pod template gained while it was
// suspended (resumedJob).
func (r *Reconciler) resume(ctx context.Context, js *jobset.JobSet, u decide.JobUpdate) error {
	cached, want := u.Cached, u.Want
	if cached.Status.StartTime != nil && !equality.Semantic.DeepEqual(cached.Spec.Template, want.Spec.Template) {
		// The Job API takes a suspended Job's template changes only
		// once it has no start time (unless its
		// MutableSchedulingDirectivesForSuspendedJobs gate is on, beta
		// since 1.36), and clearing it is allowed while suspended. A
		// Job suspended after it ran may still carry one.
		cleared := cached.DeepCopy()
		cleared.Status.StartTime = nil
		if err := r.client.Status().Patch(ctx, cleared, client.MergeFrom(cached)); err != nil {
			return ignore(err, apierrors.IsNotFound)
		}
	}
	// One write: the Job API accepts the template's changes only while
	// the Job is suspended, and its Pods must start with them.
	err := r.client.Patch(ctx, want, client.MergeFrom(cached))
	if apierrors.IsInvalid(err) {
		r.recorder.Eventf(js, cached, corev1.EventTypeWarning, decide.ReasonJobResumeFailed, "Resume", "job %s: %v", cached.Name, err)
	}
	return ignore(err, apierrors.IsNotFound)
}

// scale patches the Jobs' parallelism and completions to their replicated
// job's and records one Event per replicated job scaled. The patch carries
// the resourceVersion read: a decision taken on a stale cache (the Job
// already scaled by an earlier reconcile) fails with a conflict and says
// nothing, and the Job's update brings the next reconcile.
func (r *Reconciler) scale(ctx context.Context, js *jobset.JobSet, scales []decide.JobScale) error {
	var (
		mu   sync.Mutex
		done []decide.JobScale
	)
	err := inParallel(ctx, r.opts.ChildParallelism, scales, func(s decide.JobScale) string { return s.Job.Name }, func(ctx context.Context, s decide.JobScale) error {
		cached := s.Job
		patch := client.MergeFromWithOptions(cached, client.MergeFromWithOptimisticLock{})
		job := cached.DeepCopy() // the cache's object is read-only
		job.Spec.Parallelism = ptr.To(s.To)
		job.Spec.Completions = ptr.To(s.To)
		err := r.client.Patch(ctx, job, patch)
		if err == nil {
			mu.Lock()
			done = append(done, s)
			mu.Unlock()
		}
		return ignore(err, apierrors.IsNotFound, apierrors.IsConflict)
	})
	slices.SortFunc(done, func(a, b decide.JobScale) int { return strings.Compare(a.Job.Name, b.Job.Name) })
	for _, e := range decide.ScaledEvents(done) {
		r.recorder.Eventf(js, nil, e.Type, e.Reason, "Scale", "%s", e.Message)
	}
	if err != nil {
		return fmt.Errorf("scaling jobs: %w", err)
	}
	return nil
}

// forEach runs fn on every Job with at most ChildParallelism at once and
// returns every error.
func (r *Reconciler) forEach(ctx context.Context, jobs []*batchv1.Job, fn func(context.Context, *batchv1.Job) error) error {
	return inParallel(ctx, r.opts.ChildParallelism, jobs, func(j *batchv1.Job) string { return j.Name }, fn)
}

// inParallel runs fn on every item with at most limit at once and returns
// every error, each prefixed with its item's name.
func inParallel[T any](ctx context.Context, limit int, items []T, name func(T) string, fn func(context.Context, T) error) error {
	if len(items) == 0 {
		return nil
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, limit)
	)
	for _, item := range items {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, item); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name(item), err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// namespaceTerminating reports whether err is a creation refused because
// the namespace is being deleted.
func namespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// ignore returns nil when err matches any of the predicates.
func ignore(err error, preds ...func(error) bool) error {
	for _, p := range preds {
		if err != nil && p(err) {
			return nil
		}
	}
	return err
}

var _ reconcile.Reconciler = &Reconciler{}

// writeBroadcast creates or updates the JobSet's broadcast ConfigMap.
func (r *Reconciler) writeBroadcast(ctx context.Context, js *jobset.JobSet, data map[string]string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:            protocol.BroadcastName(js.Name),
		Namespace:       js.Namespace,
		Labels:          map[string]string{jobset.JobSetNameKey: js.Name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, jobset.GroupVersion.WithKind(jobset.Kind))},
	}}
	err := r.client.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	switch {
	case apierrors.IsNotFound(err):
		cm.Data = data
		err := r.client.Create(ctx, cm)
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		// In the cluster but not in the cache: created a moment ago and
		// not seen yet, or stripped of the label the cache selects by.
		// Read it past the cache and update it (which puts the label back).
		if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if !metav1.IsControlledBy(cm, js) {
		// Someone else's ConfigMap under the name the agents read: writing
		// it would destroy their data, and taking it over would let
		// whoever made it first feed the agents.
		r.recorder.Eventf(js, nil, corev1.EventTypeWarning, decide.ReasonBroadcastConflict, "Broadcast",
			"ConfigMap %s exists and is not this JobSet's (no controller reference to it), so the epochs cannot be broadcast and in-place restarts cannot proceed: rename or delete the ConfigMap", cm.Name)
		return fmt.Errorf("ConfigMap %s/%s is not this JobSet's", cm.Namespace, cm.Name)
	}
	cm.Data = data
	// The cache selects ConfigMaps by this label: keep it on.
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[jobset.JobSetNameKey] = js.Name
	return r.client.Update(ctx, cm)
}
