package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/coexist"
)

// The gate reads the JobSet CRD and upstream's Leases by name, past the
// cache, and watches them by name (UpstreamWatch): nothing else of either
// kind. The Leases are read in upstream's namespace, which is
// configurable, hence a ClusterRole's rights narrowed to their names
// rather than a Role in a namespace that may not exist.
// A watch narrowed to one name (a field selector on metadata.name) is
// authorized against resourceNames.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch,resourceNames=jobsets.jobset.x-k8s.io
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch,resourceNames=6d4f6a47.jobset.x-k8s.io;6d4f6a47.x-k8s.io

// DefaultUpstreamCheckInterval is how often the gate reads upstream's
// Leases and the CRD's metadata unless told otherwise.
const DefaultUpstreamCheckInterval = 2 * time.Second

const (
	// gateReadTimeout bounds the reads of one check, and how long a fresh
	// check (admitFresh) waits, the check under way included.
	gateReadTimeout = 5 * time.Second
	// gateRetryInterval is how soon reads that failed are tried again,
	// when that is sooner than the interval.
	gateRetryInterval = time.Second
	// gateFreshInterval bounds how long the gate goes on the watch's
	// word alone: a watch whose connection died silently goes stale
	// until client-go's health check closes it (45 s on HTTP/2), and a
	// Lease taken meanwhile would go unseen.
	gateFreshInterval = 30 * time.Second
	// gateTransientInterval is how soon a hold expected to end within
	// moments (coexist.Verdict.Transient) is checked again.
	gateTransientInterval = 250 * time.Millisecond
)

// UpstreamGateOptions tune the UpstreamGate.
type UpstreamGateOptions struct {
	// Namespace is where upstream JobSet's controller elects its leader.
	Namespace string
	// Interval is how often upstream's Leases and the JobSet CRD's
	// metadata are read; the CRD itself, which is large, is read again
	// only when its metadata says it changed.
	Interval time.Duration
	// Clock is the time source; tests inject a fake one.
	Clock clock.Clock
	// Metrics is where the gate registers its gauges; nil means
	// controller-runtime's registry.
	Metrics prometheus.Registerer
	// Watch, when set, serves the periodic checks' reads of the CRD's
	// metadata and of the Leases (UpstreamWatch), and a check runs at each
	// change it sees. The gate still reads through its reader before it
	// ends a hold, when the watch fails, at least every
	// gateFreshInterval, for a fresh check (admitFresh), and for the CRD
	// in full.
	Watch UpstreamCache
	// StatusWriter writes the dry-run status updates that tell whether the
	// API server serves the CRD's schema (ProbeServedSchema); nil skips
	// them.
	StatusWriter client.SubResourceWriter
}

// UpstreamCache serves reads of the JobSet CRD's metadata and of
// upstream's Leases as last seen, and tells of each change it sees.
type UpstreamCache interface {
	objectGetter
	Changed() <-chan struct{}
}

// UpstreamGate holds the JobSet controller and the agents' grants
// controller back while upstream JobSet's controller runs or the JobSet
// CRD would prune our status (coexist.Decide says which): every replica
// reads both when it starts, then takes its verdict again at each change
// its watch sees and every Interval (from the watch, and from the API
// server itself before it ends a hold and at least every
// gateFreshInterval), says what it found in its
// log, its readiness check and its gauges, and records an Event on the CRD
// when the verdict changes. The leader's reconciles ask it first (admit):
// a JobSet held back is left untouched and gets one Warning Event per
// reason; when the hold ends, every request held back is reconciled again.
// A reconcile that would delete reads again first (admitFresh): a
// deletion is not undone, and never runs on a verdict older than
// gateReadTimeout.
//
//	not read ──read──▶ held ◀──────▶ running
//	    │                               ▲
//	    └─────────────read──────────────┘
//
// Reads that fail leave the verdict as it was for coexist.ReadGrace, are
// tried again every gateRetryInterval, and hold the controller past it
// (coexist.Unread); entering and leaving that state is logged and
// recorded on the CRD. Until a read succeeds the gate holds, without an
// Event on the JobSets unless reads keep failing past the grace.
type UpstreamGate struct {
	reader   client.Reader
	recorder events.EventRecorder
	opts     UpstreamGateOptions

	upstreamGauge prometheus.Gauge
	heldGauge     prometheus.Gauge

	// jobSets and grants are the requests of the JobSet controller and of
	// the agents' grants controller held back, sent back to them when the
	// hold ends.
	jobSets, grants parking

	// checking is taken by the check that runs: a channel, so that a fresh
	// check waits for the one under way no longer than its timeout.
	checking chan struct{}
	// checks counts the checks begun, so that a fresh check can tell one
	// begun after it was asked for.
	checks atomic.Uint64
	// Under checking: the CRD as last read in full, and its UID and
	// resourceVersion then; its metadata as last read, what the Events are
	// recorded on (nil while none is installed or it was never read); since
	// when reads fail (zero while they succeed); the last check's error.
	crd        coexist.CRD
	crdVersion string
	crdObject  client.Object
	// servedVersion is the crdVersion whose schema the API server was
	// seen to serve (ProbeServedSchema); unservedSince, since when it was
	// seen not to serve the CRD's schema, zero once it does.
	servedVersion string
	unservedSince time.Time
	failingSince  time.Time
	lastErr       error
	// verdictFresh: the last check read the API server itself, at
	// lastFresh.
	verdictFresh bool
	lastFresh    time.Time

	mu sync.Mutex
	// known: a read succeeded; verdict: the current verdict.
	known   bool
	verdict coexist.Verdict
}

// parking holds one controller's requests held back.
type parking struct {
	// requeue carries them, to the controller's watch, once the hold ends.
	requeue chan event.GenericEvent
	// object is the object of a request, as the controller's watch maps it.
	object func(types.NamespacedName) client.Object
	keys   map[types.NamespacedName]parked
}

// parked is a request held back: the UID of the JobSet of that name that
// was warned for the current reason, if warned is set.
type parked struct {
	uid    types.UID
	warned bool
}

// requeued is a request sent back to its controller.
type requeued struct {
	to  chan event.GenericEvent
	obj client.Object
}

// NewUpstreamGate returns a gate that reads through reader, which must
// not be a cache: the calls are gets by name.
func NewUpstreamGate(reader client.Reader, recorder events.EventRecorder, opts UpstreamGateOptions) (*UpstreamGate, error) {
	if opts.Namespace == "" {
		opts.Namespace = coexist.UpstreamNamespace
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultUpstreamCheckInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Metrics == nil {
		opts.Metrics = ctrlmetrics.Registry
	}
	g := &UpstreamGate{
		reader:   reader,
		recorder: recorder,
		opts:     opts,
		upstreamGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inplace_upstream_jobset_controller_detected",
			Help: "1 while upstream JobSet's controller holds its Lease, as this replica last read it: the JobSet controller then reconciles no JobSet.",
		}),
		heldGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inplace_jobset_controller_held",
			Help: "1 while the JobSet controller reconciles no JobSet: upstream JobSet's controller runs, the JobSet CRD would prune inplace's status (or the API server does not serve its schema yet), or neither could be read (see the readiness check and the Events on the CRD).",
		}),
		jobSets: parking{
			requeue: make(chan event.GenericEvent),
			object: func(key types.NamespacedName) client.Object {
				return &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
			},
			keys: map[types.NamespacedName]parked{},
		},
		grants: parking{
			requeue: make(chan event.GenericEvent),
			object: func(key types.NamespacedName) client.Object {
				return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
			},
			keys: map[types.NamespacedName]parked{},
		},
		checking: make(chan struct{}, 1),
		verdict:  coexist.Verdict{Hold: true, Message: "the JobSet CRD and upstream JobSet's Leases have not been read yet"},
	}
	for _, c := range []prometheus.Collector{g.upstreamGauge, g.heldGauge} {
		if err := opts.Metrics.Register(c); err != nil {
			return nil, err
		}
	}
	g.heldGauge.Set(1)
	return g, nil
}

// NeedLeaderElection is false: every replica says in its readiness check
// whether it would hold back.
func (g *UpstreamGate) NeedLeaderElection() bool { return false }

// Start checks now and every Interval, sooner after a failed read, and at
// each change the watch sees, until ctx ends. With a watch the interval's
// checks read nothing from the API server: they are what notices a Lease
// lapse, which no write announces.
func (g *UpstreamGate) Start(ctx context.Context) error {
	var changed <-chan struct{}
	if g.opts.Watch != nil {
		changed = g.opts.Watch.Changed()
	}
	for {
		wait := g.next(g.check(ctx))
		if g.transient() {
			wait = min(wait, gateTransientInterval)
		}
		if g.opts.Watch != nil {
			// The API server's word at least every gateFreshInterval,
			// however long the interval.
			wait = min(wait, max(g.freshDue().Sub(g.opts.Clock.Now()), 0))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-g.opts.Clock.After(wait):
		case <-changed:
		}
	}
}

// transient says whether the gate holds for a reason expected to end
// within moments.
func (g *UpstreamGate) transient() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.verdict.Hold && g.verdict.Transient
}

// freshDue is when the next check must read the API server itself.
func (g *UpstreamGate) freshDue() time.Time {
	g.checking <- struct{}{}
	defer func() { <-g.checking }()
	return g.lastFresh.Add(gateFreshInterval)
}

// next is how long to wait after a check that returned err.
func (g *UpstreamGate) next(err error) time.Duration {
	if err != nil && gateRetryInterval < g.opts.Interval {
		return gateRetryInterval
	}
	return g.opts.Interval
}

// check runs one check, waiting for the one under way, and sends the
// requests the verdict lets through, or that must be warned of a new
// reason, back to their controllers. It returns the reads' error.
func (g *UpstreamGate) check(ctx context.Context) error {
	select {
	case g.checking <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	requeue, err := g.checkLocked(ctx, false)
	<-g.checking
	g.send(ctx, requeue)
	return err
}

// admitFresh says whether the controller may reconcile js now, as admit
// does, on reads begun after it was called: a reconcile that deletes asks
// it right before, so that it never deletes on a verdict older than
// gateReadTimeout. A check begun meanwhile by someone else serves it too.
// Reads that fail return an error: the deletion waits for the next
// reconcile.
func (g *UpstreamGate) admitFresh(ctx context.Context, js *jobset.JobSet, recorder events.EventRecorder) (bool, error) {
	readCtx, cancel := context.WithTimeout(ctx, gateReadTimeout)
	defer cancel()
	asked := g.checks.Load()
	select {
	case g.checking <- struct{}{}:
	case <-readCtx.Done():
		return false, fmt.Errorf("waiting for the check of upstream JobSet under way: %w", readCtx.Err())
	}
	var requeue []requeued
	err := g.lastErr
	if g.checks.Load() == asked || !g.verdictFresh {
		requeue, err = g.checkLocked(readCtx, true)
	}
	<-g.checking
	g.send(ctx, requeue)
	if err != nil {
		return false, fmt.Errorf("reading the JobSet CRD and upstream JobSet's Leases: %w", err)
	}
	return g.admit(js, recorder), nil
}

// checkLocked reads the CRD and the Leases and takes the verdict, under
// checking (gather says from where). It returns the requests to send back
// and the reads' error.
func (g *UpstreamGate) checkLocked(ctx context.Context, fresh bool) ([]requeued, error) {
	logger := log.FromContext(ctx).WithName("upstream-jobset")
	in, err := g.gather(ctx, fresh)
	if err == nil {
		g.served(ctx, &in)
	}
	now := g.opts.Clock.Now()
	g.lastErr = err
	since := g.failingSince
	entering, leaving := err != nil && since.IsZero(), err == nil && !since.IsZero()
	if entering {
		g.failingSince = now
	}
	if err == nil {
		g.failingSince = time.Time{}
	}

	g.mu.Lock()
	before, known := g.verdict, g.known
	var v coexist.Verdict
	if err != nil {
		v = coexist.Unread(before, known, g.failingSince, now, err, g.opts.Namespace)
	} else {
		in.Now = now
		v = coexist.Decide(in)
		g.known = true
	}
	g.verdict = v
	requeue := g.repark(before, v)
	g.mu.Unlock()

	g.upstreamGauge.Set(boolGauge(v.Upstream != nil))
	g.heldGauge.Set(boolGauge(v.Hold))
	crd := g.crdObject
	event := func(eventType, reason, action, format string, args ...any) {
		if crd != nil {
			g.recorder.Eventf(crd, nil, eventType, reason, action, format, args...)
		}
	}
	switch {
	case entering && known:
		logger.Error(err, "cannot read the JobSet CRD or upstream JobSet's Leases: the last verdict stands for a while", "grace", coexist.ReadGrace, "verdict", before.Message)
		event(corev1.EventTypeWarning, coexist.ReasonCheckFailing, "Check", "%s; the last verdict stands until %s, then the JobSet controller is held: %s",
			coexist.UnreadMessage(now, now, err, g.opts.Namespace), now.Add(coexist.ReadGrace).UTC().Format(time.RFC3339), before.Message)
	case entering:
		logger.Error(err, "cannot read the JobSet CRD or upstream JobSet's Leases: the JobSet controller stays held until they can be")
		event(corev1.EventTypeWarning, coexist.ReasonCheckFailing, "Check", "%s; the JobSet controller stays held until a read succeeds",
			coexist.UnreadMessage(now, now, err, g.opts.Namespace))
	case err != nil:
		logger.V(1).Info("reading the JobSet CRD or upstream JobSet's Leases failed again", "error", err.Error(), "since", since)
	case leaving:
		logger.Info("the JobSet CRD and upstream JobSet's Leases can be read again", "reason", coexist.ReasonCheckRecovered, "failedFor", now.Sub(since))
		event(corev1.EventTypeNormal, coexist.ReasonCheckRecovered, "Check", "the JobSet CRD and upstream JobSet's Leases can be read again, after failing for %s",
			now.Sub(since).Round(time.Second))
	}

	// A transient hold that lasts is said again, as any other hold.
	lasting := v.Hold && before.Transient && !v.Transient
	changed := v.Hold != before.Hold || v.Reason != before.Reason || lasting || (err == nil && !known)
	switch {
	case !changed:
	case v.Hold && v.Transient:
		logger.Info("the JobSet controller reconciles no JobSet for a moment", "reason", v.Reason, "why", v.Message)
		event(corev1.EventTypeNormal, v.Reason, "Hold", "%s", v.Message)
	case v.Hold && v.Reason != "":
		logger.Error(errors.New(v.Message), "the JobSet controller reconciles no JobSet", "reason", v.Reason)
		event(corev1.EventTypeWarning, v.Reason, "Hold", "%s", v.Message)
	case v.Hold:
	case before.Reason != "":
		logger.Info("the JobSet controller resumes", "reason", coexist.ReasonResumed, "was", before.Reason, "now", v.Message)
		event(corev1.EventTypeNormal, coexist.ReasonResumed, "Resume", "%s; was: %s", v.Message, before.Message)
	case !v.CRD.Ours:
		// Safe, but a CRD of an earlier release: say so where it is seen.
		logger.Info("the JobSet controller may run; the JobSet CRD is old", "why", v.Message)
	default:
		logger.V(1).Info("the JobSet controller may run", "why", v.Message)
	}
	return requeue, err
}

// repark returns the requests to send back on a change from before to v,
// under mu: all of them when the hold ends; the JobSets, to be warned
// again, when it holds for a new reason or a transient hold lasts.
func (g *UpstreamGate) repark(before, v coexist.Verdict) []requeued {
	var out []requeued
	if !v.Hold {
		for _, p := range []*parking{&g.jobSets, &g.grants} {
			for key := range p.keys {
				out = append(out, requeued{p.requeue, p.object(key)})
			}
			clear(p.keys)
		}
		return out
	}
	// A transient hold warns none; once it lasts, every JobSet is warned.
	if (v.Reason != before.Reason || before.Transient) && v.Reason != "" && !v.Transient {
		for key, k := range g.jobSets.keys {
			g.jobSets.keys[key] = parked{uid: k.uid}
			out = append(out, requeued{g.jobSets.requeue, g.jobSets.object(key)})
		}
	}
	return out
}

// send hands the requests to their controllers' watches.
func (g *UpstreamGate) send(ctx context.Context, requeue []requeued) {
	for _, r := range requeue {
		select {
		case r.to <- event.GenericEvent{Object: r.obj}:
		case <-ctx.Done():
			return
		}
	}
}

// gather reads the CRD and the Leases for a check, under checking: from
// the watch, unless the check must be fresh, the gate has no watch or
// has gone on its word alone for gateFreshInterval; and again from the
// API server itself when the watch's read fails or its verdict would end
// a hold, so that a stale watch never lets the controller run beside
// upstream's. Only a read from the API server counts for admitFresh.
func (g *UpstreamGate) gather(ctx context.Context, fresh bool) (coexist.Input, error) {
	now := g.opts.Clock.Now()
	if !fresh && g.opts.Watch != nil && now.Sub(g.lastFresh) < gateFreshInterval {
		readCtx, cancel := context.WithTimeout(ctx, gateReadTimeout)
		in, err := g.read(readCtx, g.opts.Watch)
		cancel()
		if err == nil {
			g.mu.Lock()
			holding := g.verdict.Hold
			g.mu.Unlock()
			in.Now = now
			if !holding || coexist.Decide(in).Hold {
				g.verdictFresh = false
				return in, nil
			}
		}
	}
	g.checks.Add(1)
	g.verdictFresh, g.lastFresh = true, now
	readCtx, cancel := context.WithTimeout(ctx, gateReadTimeout)
	defer cancel()
	return g.read(readCtx, g.reader)
}

// read reads upstream's Leases and the CRD's metadata through r, and the
// CRD in full through the gate's reader when its metadata says it is not
// the one last read, under checking.
func (g *UpstreamGate) read(ctx context.Context, r objectGetter) (coexist.Input, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	err := r.Get(ctx, types.NamespacedName{Name: coexist.CRDName}, meta)
	switch {
	case apierrors.IsNotFound(err):
		g.crd, g.crdVersion, g.crdObject = coexist.CRD{}, "", nil
	case err != nil:
		return coexist.Input{}, err
	case g.crdVersion == "" || objectVersion(meta) != g.crdVersion:
		crd, err := g.readCRD(ctx)
		if err != nil {
			return coexist.Input{}, err
		}
		g.crd, g.crdVersion, g.crdObject = coexist.InspectCRD(crd), objectVersion(crd), meta
		if crd == nil {
			g.crdObject = nil
		}
	default:
		g.crdObject = meta
	}
	in := coexist.Input{CRD: g.crd, Namespace: g.opts.Namespace}
	now := g.opts.Clock.Now()
	for _, name := range coexist.UpstreamLeaseNames {
		var l coordinationv1.Lease
		err := r.Get(ctx, types.NamespacedName{Namespace: g.opts.Namespace, Name: name}, &l)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return coexist.Input{}, err
		default:
			in.Leases = append(in.Leases, coexist.InspectLease(&l, now))
		}
	}
	return in, nil
}

// objectGetter reads one object by name: the API server, or the watch.
type objectGetter interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

// readCRD reads the JobSet CRD in full; nil if it is gone. It reads it
// unstructured: the manager's scheme does not know the CRD type.
func (g *UpstreamGate) readCRD(ctx context.Context) (*apiextensionsv1.CustomResourceDefinition, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	err := g.reader.Get(ctx, types.NamespacedName{Name: coexist.CRDName}, u)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
		return nil, err
	}
	return &crd, nil
}

// objectVersion tells one state of an object from another.
func objectVersion(o metav1.Object) string {
	if o == nil || o.GetResourceVersion() == "" {
		return ""
	}
	return string(o.GetUID()) + "/" + o.GetResourceVersion()
}

// Check is the manager's readiness check: not ready while the controller
// is held, with the reason and the fix.
func (g *UpstreamGate) Check(*http.Request) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.verdict.Hold {
		return errors.New(g.verdict.Message)
	}
	return nil
}

// admit says whether the controller may reconcile js now. A JobSet it
// may not is parked, to be reconciled again when the hold ends, and warned
// once per reason with it.
func (g *UpstreamGate) admit(js *jobset.JobSet, recorder events.EventRecorder) bool {
	g.mu.Lock()
	v := g.verdict
	if !v.Hold {
		g.mu.Unlock()
		return true
	}
	key := types.NamespacedName{Namespace: js.Namespace, Name: js.Name}
	was, ok := g.jobSets.keys[key]
	warned := ok && was.warned && was.uid == js.UID
	warn := v.Reason != "" && !v.Transient && !warned
	g.jobSets.keys[key] = parked{uid: js.UID, warned: warned || warn}
	g.mu.Unlock()
	if warn {
		recorder.Eventf(js, nil, corev1.EventTypeWarning, v.Reason, "Hold", "this JobSet is not reconciled: %s", v.Message)
	}
	return false
}

// admitGrants says whether the agents' grants controller may sync the
// request's namespace now; one it may not is parked, to be synced when
// the hold ends.
func (g *UpstreamGate) admitGrants(req types.NamespacedName) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.verdict.Hold {
		return true
	}
	g.grants.keys[req] = parked{}
	return false
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
