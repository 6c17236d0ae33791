package report

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// GroupVersion is the wg-policy reports' API, read and written
// unstructured: the project does not vendor their types.
var GroupVersion = schema.GroupVersion{Group: "wgpolicyk8s.io", Version: "v1alpha2"}

const (
	// ReportName is the name of the audit's PolicyReport in each
	// namespace.
	ReportName = "inplace-jobsetpolicies"
	// ManagedByLabel, set to ManagedBy, marks the PolicyReports the audit
	// writes: it updates and deletes those and no other.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedBy is ManagedByLabel's value on the audit's PolicyReports.
	ManagedBy = "inplace-manager"
)

// The writer lists its reports in every namespace at each complete audit
// (one request, by label, read from the API server: the manager's client
// caches no unstructured object), and creates, updates and deletes only
// those that changed.
// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports,verbs=list;create;update;delete

// Writer writes the results of complete audits into PolicyReports: one per
// namespace with results, named ReportName and labelled ManagedBy. It
// writes a report only when its content changed, and deletes the report of
// a namespace left without results. While the CRD is not installed it
// writes nothing (and says so once in the log and in
// inplace_policy_reports_enabled); it starts on the first audit after the
// CRD appears.
type Writer struct {
	// Client reads and writes the reports; it needs no cache.
	Client client.Client
	// Clock stamps new results; nil is the real clock.
	Clock clock.PassiveClock
	// Metrics counts the writes; nil counts nothing.
	Metrics *Metrics

	mu sync.Mutex
	// installed is whether the CRD was there at the last write; nil
	// before the first.
	installed *bool
}

// Write makes the reports say results: a namespace with results gets its
// report, written only if its content changed; a report of ours in a
// namespace without results is deleted. A write that fails for one
// namespace does not stop the others; the errors are returned joined.
// Call it with the results of a complete audit only: a namespace an
// incomplete one did not reach would lose its report.
func (w *Writer) Write(ctx context.Context, results *Results) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(GroupVersion.WithKind("PolicyReportList"))
	if err := w.Client.List(ctx, list, client.MatchingLabels{ManagedByLabel: ManagedBy}); err != nil {
		if meta.IsNoMatchError(err) {
			w.setInstalled(ctx, false)
			return nil
		}
		return fmt.Errorf("listing the PolicyReports: %w", err)
	}
	w.setInstalled(ctx, true)
	stored := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		if u := &list.Items[i]; u.GetName() == ReportName {
			u.SetGroupVersionKind(GroupVersion.WithKind("PolicyReport"))
			stored[u.GetNamespace()] = u
		}
	}
	var c clock.PassiveClock = clock.RealClock{}
	if w.Clock != nil {
		c = w.Clock
	}
	now := TimestampOf(c.Now())
	var errs []error
	for _, ns := range results.Namespaces() {
		if err := w.write(ctx, ns, build(results.namespaces[ns], results.max(), storedResults(stored[ns]), now), stored[ns]); err != nil {
			errs = append(errs, fmt.Errorf("namespace %s: %w", ns, err))
		}
		delete(stored, ns)
	}
	// What is left covers namespaces without results: no JobSet there,
	// or none that a policy applies to.
	for ns, u := range stored {
		uid := u.GetUID()
		err := client.IgnoreNotFound(w.Client.Delete(ctx, u, client.Preconditions{UID: &uid}))
		w.count(writeDeleted, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("namespace %s: deleting PolicyReport %s: %w", ns, ReportName, err))
		}
	}
	return errors.Join(errs...)
}

// write creates the namespace's report, or updates the stored one if its
// content differs from c.
func (w *Writer) write(ctx context.Context, ns string, c content, stored *unstructured.Unstructured) error {
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
	if err != nil {
		return err
	}
	if stored == nil {
		u := &unstructured.Unstructured{Object: want}
		u.SetGroupVersionKind(GroupVersion.WithKind("PolicyReport"))
		u.SetNamespace(ns)
		u.SetName(ReportName)
		u.SetLabels(map[string]string{ManagedByLabel: ManagedBy})
		// AlreadyExists: a report of that name not ours (no label), which
		// the audit leaves alone.
		err := w.Client.Create(ctx, u)
		w.count(writeCreated, err)
		if err != nil {
			return fmt.Errorf("creating PolicyReport %s: %w", ReportName, err)
		}
		return nil
	}
	if apiequality.Semantic.DeepEqual(want, owned(stored)) {
		return nil
	}
	u := stored.DeepCopy()
	for _, f := range ownedFields {
		delete(u.Object, f)
	}
	for f, v := range want {
		u.Object[f] = v
	}
	// Under the listed resourceVersion: a report changed since is written
	// again at the next audit.
	err = w.Client.Update(ctx, u)
	w.count(writeUpdated, err)
	if err != nil {
		return fmt.Errorf("updating PolicyReport %s: %w", ReportName, err)
	}
	return nil
}

// ownedFields are the top-level fields of content.
var ownedFields = []string{"scope", "summary", "results"}

// owned is the part of a stored report that content describes.
func owned(u *unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	for _, f := range ownedFields {
		if v, ok := u.Object[f]; ok {
			out[f] = v
		}
	}
	return out
}

// storedResults are the results of a stored report; none if it has none
// or they do not parse (it is then written whole).
func storedResults(u *unstructured.Unstructured) []reportResult {
	if u == nil {
		return nil
	}
	var c content
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(owned(u), &c); err != nil {
		return nil
	}
	return c.Results
}

func (w *Writer) count(result string, err error) {
	if err != nil {
		result = writeError
	}
	w.Metrics.countWrite(result)
}

// setInstalled records whether the CRD is installed, and logs a change
// (the first time, only its absence).
func (w *Writer) setInstalled(ctx context.Context, installed bool) {
	w.Metrics.setEnabled(installed)
	if w.installed != nil && *w.installed == installed {
		return
	}
	first := w.installed == nil
	w.installed = &installed
	switch {
	case !installed:
		log.FromContext(ctx).Info("the PolicyReport CRD (wgpolicyk8s.io/v1alpha2) is not installed: the policy audit writes no reports until it is")
	case !first:
		log.FromContext(ctx).Info("the PolicyReport CRD (wgpolicyk8s.io/v1alpha2) is installed: the policy audit writes its reports")
	}
}
