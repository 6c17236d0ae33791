package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/decide"
	"github.com/inplace-dev/inplace/controller/state"
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

// observe reads the JobSet's children: its Jobs and Pods from the child
// index (counted as their events came, see family), the rest, the agents'
// grants included, from the cache, and what earlier reconciles left for
// this one (the expectations, the restart held back). The family stays
// locked until release is called, after decide: the Jobs it holds are the
// cache's own objects, read-only (whatever changes one copies it first,
// see act).
func (r *Reconciler) observe(ctx context.Context, js *jobset.JobSet) (obs decide.Observed, release func(), err error) {
	if jobset.InPlace(js) {
		if js.Annotations[protocol.AgentReportsAnnotation] != protocol.AgentReportsPod {
			obs.ReportEndpoint = r.opts.ReportEndpoint
		}
		var cm corev1.ConfigMap
		err := r.client.Get(ctx, types.NamespacedName{Namespace: js.Namespace, Name: protocol.BroadcastName(js.Name)}, &cm)
		if client.IgnoreNotFound(err) != nil {
			return obs, nil, fmt.Errorf("getting the broadcast: %w", err)
		}
		if err == nil {
			obs.Broadcast = cm.Data
			if obs.Broadcast == nil {
				obs.Broadcast = map[string]string{}
			}
		}
		obs.ReportsSince, obs.ReportsSettling = r.reportsSince(js, obs.Broadcast, obs.ReportEndpoint.Session)
	}
	if err := r.observeAgentGrants(ctx, js, &obs); err != nil {
		return obs, nil, err
	}
	if obs.Priorities, err = r.priorities(ctx, js); err != nil {
		return obs, nil, err
	}
	obs.RestartHeldSince = r.held.Since(client.ObjectKeyFromObject(js), js.UID)

	if decide.DNSHostnamesEnabled(js) {
		err := r.client.Get(ctx, types.NamespacedName{Namespace: js.Namespace, Name: decide.Subdomain(js)}, &corev1.Service{})
		if client.IgnoreNotFound(err) != nil {
			return obs, nil, fmt.Errorf("getting headless service: %w", err)
		}
		obs.ServiceExists = err == nil
	}

	// From the cache: a reconcile that finds every claim sends no request.
	// A claim the cache cannot show (one made by hand without the
	// jobset-name label) is created again and refused as AlreadyExists.
	for _, t := range decide.ClaimTemplates(js) {
		name := decide.ClaimName(t.Template.Name, js.Name)
		err := r.client.Get(ctx, types.NamespacedName{Namespace: js.Namespace, Name: name}, &corev1.PersistentVolumeClaim{})
		if client.IgnoreNotFound(err) != nil {
			return obs, nil, fmt.Errorf("getting volume claim %s: %w", name, err)
		}
		if err == nil {
			if obs.Claims == nil {
				obs.Claims = map[string]bool{}
			}
			obs.Claims[name] = true
		}
	}
	// Last, so that the family's lock is held for decide alone.
	now := r.opts.Clock.Now()
	obs.Family, release = r.children.Lock(js.Namespace, js.UID, state.ViewOf(js))
	key := client.ObjectKeyFromObject(js)
	obs.Creating = r.expectations.Unseen(key, js.UID, obs.Family.Job, now)
	obs.Deleting = r.expectations.Undeleted(key, js.UID, obs.Family.Job, now)
	return obs, release, nil
}

// The PriorityClasses are read from the cache, which Setup starts with
// the others.
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch

// priorities resolves the priority of the Pods of js's templates as the
// API server's Priority admission plugin does (decide.Priorities): the
// class a template names, or else decide.DefaultPriority. From the cache,
// which holds every PriorityClass (a cluster has a few); a class the cache
// does not show is read past it, as it may be one just made.
func (r *Reconciler) priorities(ctx context.Context, js *jobset.JobSet) (decide.Priorities, error) {
	names := decide.PriorityClassNames(js)
	if len(names) == 0 {
		return nil, nil
	}
	out := make(decide.Priorities, len(names))
	for _, name := range names {
		if name == "" {
			var list schedulingv1.PriorityClassList
			if err := r.client.List(ctx, &list); err != nil {
				return nil, fmt.Errorf("listing PriorityClasses: %w", err)
			}
			out[name] = decide.DefaultPriority(list.Items)
			continue
		}
		var pc schedulingv1.PriorityClass
		err := r.client.Get(ctx, types.NamespacedName{Name: name}, &pc)
		if apierrors.IsNotFound(err) {
			err = r.apiReader.Get(ctx, types.NamespacedName{Name: name}, &pc)
		}
		switch {
		case apierrors.IsNotFound(err):
			// Unknown: the API server refuses the Pods until it exists.
		case err != nil:
			return nil, fmt.Errorf("getting PriorityClass %s: %w", name, err)
		default:
			out[name] = pc.Value
		}
	}
	return out, nil
}
