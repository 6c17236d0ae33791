package controller

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/controller/coexist"
)

// UpstreamWatch keeps the JobSet CRD's metadata and upstream JobSet's
// Leases by watching each of them alone, and serves the gate's periodic
// reads of them: a replica waiting on upstream then costs the API server
// nothing between their changes, where reading them every interval cost
// three requests each time (most of the controller's requests during a
// restart at scale). Each change seen is told on Changed, so that the
// gate checks at once rather than at its next interval.
//
// A read waits for its object's first list, and fails while the last
// list or watch call for it failed: the gate then reads the API server
// itself. A watch whose connection dies without an error goes stale until
// client-go's health check closes it, which is why the gate does not go
// on the watch's word alone to end a hold, nor for long (gather).
type UpstreamWatch struct {
	c       client.WithWatch
	objects map[types.NamespacedName]*watchedObject
	changed chan struct{}
}

// watchedObject is one object's informer, narrowed to its name.
type watchedObject struct {
	gvk      schema.GroupVersionKind
	resource schema.GroupResource
	informer toolscache.SharedIndexInformer

	mu sync.Mutex
	// err is the last list or watch call's error, nil once one succeeds.
	err error
}

// NewUpstreamWatch returns a watch, through c, of the JobSet CRD's
// metadata and of upstream's Leases in namespace. Start runs it.
func NewUpstreamWatch(c client.WithWatch, namespace string) *UpstreamWatch {
	w := &UpstreamWatch{c: c, objects: map[types.NamespacedName]*watchedObject{}, changed: make(chan struct{}, 1)}
	crd := apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")
	w.add(types.NamespacedName{Name: coexist.CRDName}, crd, "customresourcedefinitions", func() client.ObjectList {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(crd.GroupVersion().WithKind("CustomResourceDefinitionList"))
		return l
	}, &metav1.PartialObjectMetadata{})
	for _, name := range coexist.UpstreamLeaseNames {
		w.add(types.NamespacedName{Namespace: namespace, Name: name}, coordinationv1.SchemeGroupVersion.WithKind("Lease"), "leases",
			func() client.ObjectList { return &coordinationv1.LeaseList{} }, &coordinationv1.Lease{})
	}
	return w
}

func (w *UpstreamWatch) add(key types.NamespacedName, gvk schema.GroupVersionKind, resource string, newList func() client.ObjectList, example runtime.Object) {
	o := &watchedObject{gvk: gvk, resource: schema.GroupResource{Group: gvk.Group, Resource: resource}}
	opts := []client.ListOption{client.InNamespace(key.Namespace), client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", key.Name)}}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, raw metav1.ListOptions) (runtime.Object, error) {
			list := newList()
			err := w.c.List(ctx, list, append(opts, &client.ListOptions{Raw: &raw})...)
			o.record(err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, raw metav1.ListOptions) (watch.Interface, error) {
			wi, err := w.c.Watch(ctx, newList(), append(opts, &client.ListOptions{Raw: &raw})...)
			o.record(err)
			return wi, err
		},
	}
	o.informer = toolscache.NewSharedIndexInformer(lw, example, 0, toolscache.Indexers{})
	tell := func() {
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	_, _ = o.informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { tell() },
		UpdateFunc: func(any, any) { tell() },
		DeleteFunc: func(any) { tell() },
	})
	w.objects[key] = o
}

func (o *watchedObject) lastErr() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (o *watchedObject) record(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.err = err
}

// NeedLeaderElection is false: every replica's gate reads through it.
func (w *UpstreamWatch) NeedLeaderElection() bool { return false }

// Start runs the watches until ctx ends.
func (w *UpstreamWatch) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, o := range w.objects {
		wg.Go(func() { o.informer.RunWithContext(ctx) })
	}
	wg.Wait()
	return nil
}

// Changed receives a value after each change of a watched object.
func (w *UpstreamWatch) Changed() <-chan struct{} { return w.changed }

// Get reads a watched object as last seen: the CRD's metadata
// (PartialObjectMetadata) or a Lease. It waits, while ctx lasts, for the
// object's first list.
func (w *UpstreamWatch) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	o, ok := w.objects[key]
	if !ok {
		return fmt.Errorf("%s is not watched", key)
	}
	// Until the first list lands, or fails: a list refused (RBAC not
	// upgraded, say) is said at once rather than at the deadline.
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return o.informer.HasSynced() || o.lastErr() != nil, nil
	})
	if err == nil {
		err = o.lastErr()
	}
	if err != nil {
		return fmt.Errorf("watching %s %s: %w", o.gvk.Kind, key, err)
	}
	item, exists, err := o.informer.GetStore().GetByKey(toolscache.NewObjectName(key.Namespace, key.Name).String())
	switch {
	case err != nil:
		return err
	case !exists:
		return apierrors.NewNotFound(o.resource, key.Name)
	}
	// A copy: the cache's object is shared.
	from, into := reflect.ValueOf(item.(runtime.Object).DeepCopyObject()).Elem(), reflect.ValueOf(obj).Elem()
	if from.Type() != into.Type() {
		return fmt.Errorf("%s %s is a %s, not a %s", o.gvk.Kind, key, from.Type(), into.Type())
	}
	into.Set(from)
	// Informers keep no kind: the gate records Events on what it reads.
	obj.GetObjectKind().SetGroupVersionKind(o.gvk)
	return nil
}
