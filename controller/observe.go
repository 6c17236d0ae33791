package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

// Field indexes of the manager's cache.
const (
	// jobOwnerUIDIndex indexes Jobs by the UID of their controlling JobSet,
	// so that a JobSet recreated under the same name never sees the Jobs of
	// its predecessor.
	jobOwnerUIDIndex = "jobset.owner.uid"
	// podJobSetUIDIndex indexes Pods by the jobset-uid label their Job gave
	// them.
	podJobSetUIDIndex = "jobset.pod.uid"
)

// CacheOptions limits the manager's caches to what the controller owns:
// Jobs, Pods and Services carrying the jobset-name label, never every Pod of
// the cluster. Pass it to the manager's cache options.
func CacheOptions() cache.Options {
	owned, err := labels.NewRequirement(jobset.JobSetNameKey, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key and operator: cannot fail
	}
	selector := labels.NewSelector().Add(*owned)
	managed := labels.SelectorFromSet(labels.Set{ManagedByLabel: "inplace"})
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&rbacv1.Role{}:        {Label: managed},
		&rbacv1.RoleBinding{}: {Label: managed},
		&batchv1.Job{}:        {Label: selector},
		&corev1.Pod{}:         {Label: selector},
		&corev1.Service{}:     {Label: selector},
		// The claims of spec.volumeClaimPolicies carry the label too.
		&corev1.PersistentVolumeClaim{}: {Label: selector},
		// The broadcast objects carry the JobSet's name label: the cache
		// holds them and no other ConfigMap of the cluster.
		&corev1.ConfigMap{}: {Label: selector},
	}}
}

func setupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &batchv1.Job{}, jobOwnerUIDIndex, func(o client.Object) []string {
		for _, ref := range o.GetOwnerReferences() {
			if ref.Controller != nil && *ref.Controller && ref.Kind == jobset.Kind && ref.APIVersion == jobset.GroupVersion.String() {
				return []string{string(ref.UID)}
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing jobs: %w", err)
	}
	if err := indexer.IndexField(ctx, &corev1.Pod{}, podJobSetUIDIndex, func(o client.Object) []string {
		if uid := o.GetLabels()[jobset.JobSetUIDKey]; uid != "" {
			return []string{uid}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing pods: %w", err)
	}
	return nil
}

// observe reads the JobSet's children from the cache. The Jobs and Pods are
// the cache's own objects, not copies — a reconcile of a JobSet of N Pods,
// one per Pod change during a restart, would otherwise copy N Pods and N
// Jobs each time — so they are read-only: whatever changes one copies it
// first (see act).
func (r *Reconciler) observe(ctx context.Context, js *jobset.JobSet) (observed, error) {
	var obs observed
	var jobs batchv1.JobList
	if err := r.client.List(ctx, &jobs, client.InNamespace(js.Namespace), client.MatchingFields{jobOwnerUIDIndex: string(js.UID)}, client.UnsafeDisableDeepCopy); err != nil {
		return obs, fmt.Errorf("listing jobs: %w", err)
	}
	obs.jobs = jobs.Items
	now := r.opts.Clock.Now()
	obs.creating = r.expectations.unseen(client.ObjectKeyFromObject(js), js.UID, jobs.Items, now)
	obs.deleting = r.expectations.undeleted(client.ObjectKeyFromObject(js), js.UID, jobs.Items, now)

	if js.Spec.FailurePolicy != nil && (js.Spec.FailurePolicy.RestartStrategy == jobset.BlockingRecreate || inPlace(js)) {
		var pods corev1.PodList
		if err := r.client.List(ctx, &pods, client.InNamespace(js.Namespace), client.MatchingFields{podJobSetUIDIndex: string(js.UID)}, client.UnsafeDisableDeepCopy); err != nil {
			return obs, fmt.Errorf("listing pods: %w", err)
		}
		obs.pods = pods.Items
	}

	if inPlace(js) {
		var cm corev1.ConfigMap
		err := r.client.Get(ctx, types.NamespacedName{Namespace: js.Namespace, Name: protocol.BroadcastName(js.Name)}, &cm)
		if client.IgnoreNotFound(err) != nil {
			return obs, fmt.Errorf("getting the broadcast: %w", err)
		}
		if err == nil {
			obs.broadcast = cm.Data
			if obs.broadcast == nil {
				obs.broadcast = map[string]string{}
			}
		}
	}

	if dnsHostnamesEnabled(js) {
		err := r.client.Get(ctx, types.NamespacedName{Namespace: js.Namespace, Name: subdomain(js)}, &corev1.Service{})
		if client.IgnoreNotFound(err) != nil {
			return obs, fmt.Errorf("getting headless service: %w", err)
		}
		obs.serviceExists = err == nil
	}

	// From the cache: a reconcile that finds every claim sends no request.
	// A claim the cache cannot show (one made by hand without the
	// jobset-name label) is created again and refused as AlreadyExists.
	for _, t := range claimTemplates(js) {
		name := ClaimName(t.template.Name, js.Name)
		err := r.client.Get(ctx, types.NamespacedName{Namespace: js.Namespace, Name: name}, &corev1.PersistentVolumeClaim{})
		if client.IgnoreNotFound(err) != nil {
			return obs, fmt.Errorf("getting volume claim %s: %w", name, err)
		}
		if err == nil {
			if obs.claims == nil {
				obs.claims = map[string]bool{}
			}
			obs.claims[name] = true
		}
	}
	return obs, nil
}
