package controller

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
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
// cache: no list, no watch, nothing else of either kind. The Leases are
// read in upstream's namespace, which is configurable, hence a
// ClusterRole's get narrowed to their names rather than a Role in a
// namespace that may not exist.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get,resourceNames=jobsets.jobset.x-k8s.io
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get,resourceNames=6d4f6a47.jobset.x-k8s.io;6d4f6a47.x-k8s.io

// UpstreamGateOptions tune the UpstreamGate.
type UpstreamGateOptions struct {
	// Namespace is where upstream JobSet's controller elects its leader.
	Namespace string
	// Interval is how often the CRD and the Leases are read.
	Interval time.Duration
	// Clock is the time source; tests inject a fake one.
	Clock clock.Clock
	// Metrics is where the gate registers its gauges; nil means
	// controller-runtime's registry.
	Metrics prometheus.Registerer
}

// UpstreamGate holds the JobSet controller back while upstream JobSet's
// controller runs or the JobSet CRD is not ours (coexist.Decide says
// which): every replica reads both when it starts and every Interval,
// says what it found in its log, its readiness check and its gauges, and
// records an Event on the CRD when the verdict changes. The leader's
// reconciles ask it first (admit): a JobSet held back is left untouched
// and gets one Warning Event; when the hold ends, every JobSet held back
// is reconciled again.
//
//	not checked ──first check──▶ held ◀──────▶ running
//	     │                                        ▲
//	     └────────────────first check─────────────┘
//
// Until its first check the gate holds too, without an Event: the JobSets
// reconciled in that moment are reconciled again right after it.
type UpstreamGate struct {
	reader   client.Reader
	recorder events.EventRecorder
	opts     UpstreamGateOptions

	upstreamGauge prometheus.Gauge
	heldGauge     prometheus.Gauge

	// resume carries the JobSets held back, to the controller's watch,
	// once the hold ends.
	resume chan event.GenericEvent

	mu      sync.Mutex
	checked bool
	verdict coexist.Verdict
	// parked are the JobSets held back since the hold began, with the UID
	// that was warned for the current reason ("" for none yet; a JobSet
	// recreated under its name is warned anew).
	parked map[types.NamespacedName]types.UID
}

// NewUpstreamGate returns a gate that reads through reader, which must
// not be a cache: the calls are gets by name.
func NewUpstreamGate(reader client.Reader, recorder events.EventRecorder, opts UpstreamGateOptions) (*UpstreamGate, error) {
	if opts.Namespace == "" {
		opts.Namespace = coexist.UpstreamNamespace
	}
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Second
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
			Help: "1 while upstream JobSet's controller holds its Lease: the JobSet controller then reconciles no JobSet.",
		}),
		heldGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inplace_jobset_controller_held",
			Help: "1 while the JobSet controller reconciles no JobSet: upstream JobSet's controller runs, or the JobSet CRD is not inplace's (see the readiness check and the Events on the CRD).",
		}),
		resume: make(chan event.GenericEvent),
		parked: map[types.NamespacedName]types.UID{},
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

// Start checks now and every Interval until ctx ends.
func (g *UpstreamGate) Start(ctx context.Context) error {
	for {
		g.check(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-g.opts.Clock.After(g.opts.Interval):
		}
	}
}

// check reads the CRD and the Leases and takes the verdict. A read that
// fails keeps the controller held: a gate that cannot see is closed.
func (g *UpstreamGate) check(ctx context.Context) {
	logger := log.FromContext(ctx).WithName("upstream-jobset")
	crd, err := g.readCRD(ctx)
	if err != nil {
		g.fail(ctx, err)
		return
	}
	in := coexist.Input{CRD: coexist.InspectCRD(crd.typed), Namespace: g.opts.Namespace, Now: g.opts.Clock.Now()}
	for _, name := range coexist.UpstreamLeaseNames {
		var l coordinationv1.Lease
		err := g.reader.Get(ctx, types.NamespacedName{Namespace: g.opts.Namespace, Name: name}, &l)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			g.fail(ctx, err)
			return
		default:
			in.Leases = append(in.Leases, coexist.InspectLease(&l, in.Now))
		}
	}
	v := coexist.Decide(in)

	g.mu.Lock()
	before, first := g.verdict, !g.checked
	g.verdict, g.checked = v, true
	var release []types.NamespacedName
	for key := range g.parked {
		switch {
		case !v.Hold:
			release = append(release, key)
			delete(g.parked, key)
		case v.Reason != before.Reason:
			// Held back for another reason now: warned again at its
			// next reconcile.
			g.parked[key] = ""
		}
	}
	g.mu.Unlock()

	g.upstreamGauge.Set(boolGauge(v.Upstream != nil))
	g.heldGauge.Set(boolGauge(v.Hold))
	changed := first || v.Hold != before.Hold || v.Reason != before.Reason
	switch {
	case changed && v.Hold:
		logger.Error(errors.New(v.Message), "the JobSet controller reconciles no JobSet", "reason", v.Reason)
		if crd.object != nil {
			g.recorder.Eventf(crd.object, nil, corev1.EventTypeWarning, v.Reason, "Hold", "%s", v.Message)
		}
	case changed && !first:
		logger.Info("the JobSet controller resumes", "reason", coexist.ReasonResumed, "was", before.Reason, "now", v.Message)
		if crd.object != nil {
			g.recorder.Eventf(crd.object, nil, corev1.EventTypeNormal, coexist.ReasonResumed, "Resume", "%s; was: %s", v.Message, before.Message)
		}
	case changed && !v.CRD.Ours:
		// Safe, but a CRD of an earlier release: say so where it is seen.
		logger.Info("the JobSet controller may run; the JobSet CRD is old", "why", v.Message)
	case changed:
		logger.V(1).Info("the JobSet controller may run", "why", v.Message)
	}
	for _, key := range release {
		js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		select {
		case g.resume <- event.GenericEvent{Object: js}:
		case <-ctx.Done():
			return
		}
	}
}

// fail records a read that failed: the controller stays held, and the
// readiness check and the log say why.
func (g *UpstreamGate) fail(ctx context.Context, err error) {
	log.FromContext(ctx).WithName("upstream-jobset").Error(err, "cannot tell whether upstream JobSet runs: the JobSet controller stays held", "namespace", g.opts.Namespace)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.verdict = coexist.Verdict{Hold: true, Reason: g.verdict.Reason, Message: "reading the JobSet CRD or upstream JobSet's Leases failed: " + err.Error() +
		" (the manager needs get on customresourcedefinitions/" + coexist.CRDName + " and on leases of those names in " + g.opts.Namespace + ")"}
	g.heldGauge.Set(1)
}

// gateCRD is the JobSet CRD as read: typed for coexist, unstructured as
// the object its Events are about (the manager's scheme does not know the
// CRD type).
type gateCRD struct {
	typed  *apiextensionsv1.CustomResourceDefinition
	object runtime.Object
}

func (g *UpstreamGate) readCRD(ctx context.Context) (gateCRD, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	err := g.reader.Get(ctx, types.NamespacedName{Name: coexist.CRDName}, u)
	if apierrors.IsNotFound(err) {
		return gateCRD{}, nil
	}
	if err != nil {
		return gateCRD{}, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
		return gateCRD{}, err
	}
	return gateCRD{typed: &crd, object: u}, nil
}

// Check is the manager's readiness check: not ready while the controller
// is held, with the reason and the fix.
func (g *UpstreamGate) Check(*http.Request) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case !g.checked && g.verdict.Message == "":
		return errors.New("the JobSet CRD and upstream JobSet's Lease have not been read yet")
	case g.verdict.Hold:
		return errors.New(g.verdict.Message)
	}
	return nil
}

// admit says whether the controller may reconcile js now. A JobSet it
// may not is parked, to be reconciled again when the hold ends, and warned
// once per hold with the reason.
func (g *UpstreamGate) admit(js *jobset.JobSet, recorder events.EventRecorder) bool {
	g.mu.Lock()
	v, checked := g.verdict, g.checked
	key := types.NamespacedName{Namespace: js.Namespace, Name: js.Name}
	if checked && !v.Hold {
		g.mu.Unlock()
		return true
	}
	warn := checked && v.Reason != "" && g.parked[key] != js.UID
	if warn {
		g.parked[key] = js.UID
	} else if _, ok := g.parked[key]; !ok {
		g.parked[key] = ""
	}
	g.mu.Unlock()
	if warn {
		recorder.Eventf(js, nil, corev1.EventTypeWarning, v.Reason, "Hold", "this JobSet is not reconciled: %s", v.Message)
	}
	return false
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
