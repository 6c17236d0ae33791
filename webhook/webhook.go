package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/review"
)

// Paths of the two webhooks on the webhook server.
const (
	MutatePath   = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
	ValidatePath = "/validate-jobset-x-k8s-io-v1alpha2-jobset"
)

// maxMutationPasses bounds the re-application of admin patches: a set of
// patches that keeps changing the object is an error, not a loop.
const maxMutationPasses = 3

// Options configure the webhooks.
type Options struct {
	Agent  configv1alpha1.Agent
	Engine *policies.Engine
	// Reader reads Namespaces, for the namespace selectors of policies.
	Reader client.Reader
	// APIReader reads PersistentVolumeClaims past the manager's cache,
	// which holds only the claims of JobSets: a JobSet created with
	// volumeClaimPolicies whose claims exist must match them. Nil skips
	// the check.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Metrics is where Setup registers the webhooks' metrics; nil means
	// controller-runtime's registry, which the manager's metrics endpoint
	// serves.
	Metrics prometheus.Registerer
	// Ready reports whether the admins' policies are loaded; until then
	// both webhooks refuse every request, so that nothing is admitted
	// unguarded while a replica starts. Nil is always ready.
	Ready func() bool
}

// errNotReady is the answer of a replica still loading the policies. The
// webhooks fail closed: the client sees it and tries again.
var errNotReady = errors.New("the admission server (inplace-webhook) is still loading the JobSetPolicies and the objects they read (data.inventory) and admits nothing until they are in force; retry in a few seconds")

func (o *Options) ready() bool { return o.Ready == nil || o.Ready() }

// pipeline is the admission pipeline both webhooks run a stage of.
func (o *Options) pipeline() Pipeline { return Pipeline{Agent: o.Agent, Engine: o.Engine} }

// requestContext bounds every policy evaluation of one admission request
// (the mutating webhook's passes, the validating webhook's ratchet) by the
// engine's request limit, within the webhooks' own timeout.
func (o *Options) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.Engine == nil {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, o.Engine.Limits().TotalTimeout)
}

// Setup registers both webhooks on the manager's webhook server.
func Setup(mgr ctrl.Manager, opts Options) error {
	reg := opts.Metrics
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	metrics, err := newAdmissionMetrics(reg)
	if err != nil {
		return err
	}
	srv := mgr.GetWebhookServer()
	srv.Register(MutatePath, &admission.Webhook{Handler: &Mutator{opts: opts, metrics: metrics}})
	srv.Register(ValidatePath, &admission.Webhook{Handler: &Validator{opts: opts, metrics: metrics}})
	srv.Register(ValidatePolicyPath, &admission.Webhook{Handler: &PolicyValidator{metrics: metrics}})
	return nil
}

// NewMutator returns the mutating webhook's handler.
func NewMutator(opts Options) *Mutator { return &Mutator{opts: opts} }

// NewValidator returns the validating webhook's handler.
func NewValidator(opts Options) *Validator { return &Validator{opts: opts} }

// Mutator is the mutating webhook.
type Mutator struct {
	opts    Options
	metrics *admissionMetrics
}

// Handle defaults and injects a created JobSet and applies admin patches;
// on an update it restores what the request leaves out (see Restore).
func (m *Mutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	ctx, cancel := m.opts.requestContext(ctx)
	defer cancel()
	resp := m.handle(ctx, req)
	m.metrics.observe("mutate", resp, time.Since(start))
	return resp
}

func (m *Mutator) handle(ctx context.Context, req admission.Request) admission.Response {
	if !m.opts.ready() {
		return admission.Errored(http.StatusServiceUnavailable, errNotReady)
	}
	js, err := decode(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation == admissionv1.Update {
		old, err := decode(req.OldObject.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		restore := func(js *jobset.JobSet) { Restore(js, old) }
		// The patch rules apply to updates too (input.operation says
		// which), to the JobSet as restored; not to a JobSet being
		// deleted, whose finalizers must come off whatever a policy says.
		// Without one in force, the update is only restored: the old
		// object and the namespace are read for the patch rules alone.
		var in policies.Input
		pipeline := m.opts.pipeline()
		if old.DeletionTimestamp != nil || pipeline.patchEngine() == nil {
			pipeline.SkipPatchRules = true
		} else {
			nsLabels, err := m.opts.namespaceLabels(ctx, req.Namespace)
			if err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			oldMap, err := toMap(req.OldObject.Raw)
			if err != nil {
				return admission.Errored(http.StatusBadRequest, err)
			}
			in = review.FromRequest(&req.AdmissionRequest, nil, oldMap, nsLabels)
		}
		raw, warnings, err := untilStable(ctx, js, pipeline.patchEngine(), in, restore)
		if err != nil {
			return admission.Denied(err.Error())
		}
		return admission.PatchResponseFromRaw(req.Object.Raw, raw).WithWarnings(warnings...)
	}
	nsLabels, err := m.opts.namespaceLabels(ctx, req.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	mutated, err := m.opts.pipeline().Mutate(ctx, js, review.FromRequest(&req.AdmissionRequest, nil, nil, nsLabels))
	if err != nil {
		return admission.Denied(err.Error())
	}
	if len(mutated.Injected) > 0 {
		log.FromContext(ctx).V(1).Info("injected", "jobset", req.Name, "decisions", len(mutated.Injected))
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated.JSON).WithWarnings(mutated.Warnings...)
}

// applyPolicyPatches applies each policy's patch operations, policy by
// policy, and fails closed for Deny policies only. A Deny policy whose
// patch rules cannot be evaluated (an error, its time limit) or whose
// operations cannot apply refuses the JobSet, and nothing is patched: its
// patch may be what makes the JobSet safe to admit, as its deny rules
// would refuse it. A Warn policy's are skipped, logged and returned as a
// warning, and the JobSet goes on without them: Warn never blocks. A
// DryRun policy's are never applied, so its failure is only logged; the
// engine counts every failed evaluation
// (inplace_policy_evaluation_failures_total), and the validating webhook
// records it as the policy's violation.
func applyPolicyPatches(ctx context.Context, engine *policies.Engine, in policies.Input, raw []byte) ([]byte, []string, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, nil, err
	}
	in = review.WithObject(in, obj)
	d, err := engine.EvaluateAdmin(ctx, in)
	if err != nil {
		log.FromContext(ctx).Error(err, "evaluating patch rules", "jobset", in.Name)
	}
	// The engine records a policy whose evaluation failed as a violation of
	// its own action, and gives it no operations (Policy.eval).
	if failed := failedEvaluations(d.Denied); len(failed) > 0 {
		return nil, nil, fmt.Errorf("%s; the patch rules of a Deny policy that fails refuse the JobSet rather than admit it unpatched", DenialMessage(in.Name, failed))
	}
	var warnings []string
	for _, v := range failedEvaluations(d.Warned) {
		warnings = append(warnings, v.String()+"; its patch rules were not applied")
	}
	for i := 0; i < len(d.Patches); {
		j := i
		for j < len(d.Patches) && d.Patches[j].Policy == d.Patches[i].Policy {
			j++
		}
		out, err := applyPatch(d.Patches[i:j], raw)
		switch {
		case err == nil:
			raw = out
		case d.Patches[i].Action == policies.Deny:
			return nil, nil, err
		default:
			log.FromContext(ctx).Error(err, "skipping the patch rules of a Warn policy", "policy", d.Patches[i].Policy)
			warnings = append(warnings, err.Error()+"; not applied")
		}
		i = j
	}
	return raw, warnings, nil
}

// failedEvaluations returns the violations that say a policy's evaluation
// failed.
func failedEvaluations(vs []policies.Violation) []policies.Violation {
	var out []policies.Violation
	for _, v := range vs {
		if v.Failed {
			out = append(out, v)
		}
	}
	return out
}

// applyPatch applies one policy's operations to raw.
func applyPatch(ps []policies.Patch, raw []byte) ([]byte, error) {
	ops := make([]map[string]any, 0, len(ps))
	for _, p := range ps {
		ops = append(ops, p.Op)
	}
	opsJSON, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.DecodePatch(opsJSON)
	if err != nil {
		return nil, fmt.Errorf("policy %s: invalid patch: %w", ps[0].Policy, err)
	}
	out, err := patch.ApplyWithOptions(raw, &jsonpatch.ApplyOptions{EnsurePathExistsOnAdd: true, AllowMissingPathOnRemove: true})
	if err != nil {
		return nil, fmt.Errorf("applying the patch rules of %s: %w", ps[0].Policy, err)
	}
	return out, nil
}

// Validator is the validating webhook.
type Validator struct {
	opts    Options
	metrics *admissionMetrics
}

// Handle runs every policy on the JobSet.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	ctx, cancel := v.opts.requestContext(ctx)
	defer cancel()
	resp := v.handle(ctx, req)
	v.metrics.observe("validate", resp, time.Since(start))
	return resp
}

func (v *Validator) handle(ctx context.Context, req admission.Request) admission.Response {
	if !v.opts.ready() {
		return admission.Errored(http.StatusServiceUnavailable, errNotReady)
	}
	obj, err := toMap(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var old map[string]any
	if req.Operation == admissionv1.Update {
		if old, err = toMap(req.OldObject.Raw); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	nsLabels, err := v.opts.namespaceLabels(ctx, req.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	d, err := v.opts.pipeline().Evaluate(ctx, review.FromRequest(&req.AdmissionRequest, obj, old, nsLabels))
	if err != nil {
		log.FromContext(ctx).Error(err, "evaluating policies", "jobset", req.Name)
	}
	var ratcheted []string
	if req.Operation == admissionv1.Update && len(d.Denied) > 0 {
		d.Denied, ratcheted = v.ratchet(ctx, req, obj, old, nsLabels, d.Denied)
	}
	if req.Operation == admissionv1.Create && v.opts.APIReader != nil && hasClaimPolicies(obj) {
		js, err := decode(req.Object.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		claims, err := existingClaims(ctx, v.opts.APIReader, req.Namespace, js)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		d.Denied = append(d.Denied, claims...)
	}
	warnings := append(messagesOf(d.Warned), ratcheted...)
	if len(d.DryRun) > 0 && (req.DryRun == nil || !*req.DryRun) && v.opts.Recorder != nil {
		js, _ := decode(req.Object.Raw)
		if js != nil {
			if js.Namespace == "" {
				js.Namespace = req.Namespace
			}
			recordDryRun(v.opts.Recorder, js, d.DryRun)
		}
	}
	if len(d.Denied) > 0 {
		return Denial(req.Name, d.Denied).WithWarnings(warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// maxEventNote is the most an Event's note may hold (events.k8s.io/v1).
const maxEventNote = 1024

// ReasonPolicyViolationDryRun is the reason of the Warning Event that
// says what a DryRun policy would have denied.
const ReasonPolicyViolationDryRun = "PolicyViolationDryRun"

// recordDryRun records one PolicyViolationDryRun Event per DryRun policy
// that js violates, related to that policy, with its messages joined. The
// Event recorder counts Events of one object, reason and related object as
// one series and keeps the first note only: an Event per message would
// lose all but a policy's first.
func recordDryRun(recorder events.EventRecorder, js *jobset.JobSet, violations []policies.Violation) {
	var order []string
	byPolicy := map[string][]string{}
	for _, viol := range violations {
		if _, seen := byPolicy[viol.Policy]; !seen {
			order = append(order, viol.Policy)
		}
		byPolicy[viol.Policy] = append(byPolicy[viol.Policy], viol.Message)
	}
	for _, name := range order {
		note := policies.Truncate(name+": "+strings.Join(byPolicy[name], "; "), maxEventNote)
		policy := &policyv1alpha1.JobSetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		recorder.Eventf(js, policy, corev1.EventTypeWarning, ReasonPolicyViolationDryRun, "Admit", "%s", note)
	}
}

// ratchet lets an update through the violations the stored JobSet had
// already, as the apiserver's validation ratcheting does for a CRD's
// schema: a policy created after a JobSet, or made stricter, must not
// block the updates that do not touch what it denies, such as Kueue's
// unsuspend or a finalizer's removal. A violation is the same when the
// same policy says the same of the stored JobSet, evaluated as an update
// that changes nothing; a message that names a changed value is new, and
// denies. An inexact message (an evaluation that failed, a message cut)
// never ratchets: a Deny policy that cannot decide denies. A JobSet being
// deleted whose spec the update leaves alone is never blocked: only its
// metadata, finalizers among them, changes. What is let through comes
// back as a warning.
func (v *Validator) ratchet(ctx context.Context, req admission.Request, obj, old map[string]any, nsLabels map[string]string, denied []policies.Violation) (still []policies.Violation, warnings []string) {
	if meta, _ := old["metadata"].(map[string]any); meta["deletionTimestamp"] != nil && equality.Semantic.DeepEqual(obj["spec"], old["spec"]) {
		for _, viol := range denied {
			warnings = append(warnings, "not enforced on a JobSet being deleted: "+viol.String())
		}
		return nil, warnings
	}
	before, err := v.opts.pipeline().Evaluate(ctx, review.FromRequest(&req.AdmissionRequest, old, old, nsLabels))
	if err != nil {
		log.FromContext(ctx).Error(err, "evaluating policies on the stored JobSet", "jobset", req.Name)
	}
	existing := map[policies.Violation]bool{}
	for _, viol := range before.Denied {
		existing[viol] = !viol.Inexact
	}
	for _, viol := range denied {
		if !viol.Inexact && existing[viol] {
			warnings = append(warnings, "not enforced on this update, the stored JobSet had the same violation already: "+viol.String())
			continue
		}
		still = append(still, viol)
	}
	return still, warnings
}

func hasClaimPolicies(obj map[string]any) bool {
	spec, _ := obj["spec"].(map[string]any)
	ps, _ := spec["volumeClaimPolicies"].([]any)
	return len(ps) > 0
}

// namespaceLabels returns the labels of the request's namespace, for the
// policies' namespace selectors. A namespace created a moment ago may not
// be in the cache yet: it is then read from the apiserver. A lookup that
// fails refuses the request: without the labels, a policy selected by
// them would be skipped and the JobSet admitted unguarded.
func (o *Options) namespaceLabels(ctx context.Context, ns string) (map[string]string, error) {
	// Looked up whether or not a policy is in force now: one may be by
	// the time the engine evaluates.
	if o.Reader == nil || ns == "" {
		return nil, nil
	}
	var n corev1.Namespace
	err := o.Reader.Get(ctx, client.ObjectKey{Name: ns}, &n)
	if apierrors.IsNotFound(err) && o.APIReader != nil {
		err = o.APIReader.Get(ctx, client.ObjectKey{Name: ns}, &n)
	}
	if err != nil {
		return nil, fmt.Errorf("reading namespace %s for the policies' namespace selectors: %w; the request is refused rather than admitted unguarded", ns, err)
	}
	if n.Labels == nil {
		return map[string]string{}, nil
	}
	return n.Labels, nil
}

func decode(raw []byte) (*jobset.JobSet, error) {
	var js jobset.JobSet
	if err := json.Unmarshal(raw, &js); err != nil {
		return nil, fmt.Errorf("decoding JobSet: %w", err)
	}
	return &js, nil
}

func toMap(raw []byte) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decoding JobSet: %w", err)
	}
	return m, nil
}

func messagesOf(vs []policies.Violation) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return out
}
