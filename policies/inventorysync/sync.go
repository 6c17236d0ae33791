package inventorysync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/inplace-dev/inplace/policies"
)

// Syncer writes the objects of the configured kinds into an inventory.
type Syncer struct {
	// Cache is the manager's: a kind the manager caches already (Namespaces,
	// JobSets) costs no second copy in its typed form.
	Cache  cache.Cache
	Scheme *runtime.Scheme
	// Inventory receives the objects.
	Inventory *policies.Inventory
	// Kinds to sync.
	Kinds []schema.GroupVersionKind

	synced  atomic.Bool
	fullLog sync.Once

	mu      sync.Mutex
	pending []pendingKind
}

type pendingKind struct {
	gvk    schema.GroupVersionKind
	synced toolscache.InformerSynced
}

// Start registers an informer per kind, waits for each to sync, and
// returns: the informers run with the cache. Run it as a manager
// Runnable on every replica that admits JobSets (not only the leader).
func (s *Syncer) Start(ctx context.Context) error {
	var syncs []toolscache.InformerSynced
	for _, gvk := range s.Kinds {
		obj, err := s.newObject(gvk)
		if err != nil {
			return err
		}
		// Not blocking: a kind whose list is refused (RBAC) or slow must be
		// named by the readiness check, not hang this start.
		inf, err := s.Cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("policies.inventory.sync: watching %s: %w (the manager's ClusterRole needs list and watch on it)", gvk, err)
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { s.put(ctx, gvk, o) },
			UpdateFunc: func(_, o any) { s.put(ctx, gvk, o) },
			DeleteFunc: func(o any) { s.delete(ctx, gvk, o) },
		})
		if err != nil {
			return err
		}
		syncs = append(syncs, reg.HasSynced)
		s.mu.Lock()
		s.pending = append(s.pending, pendingKind{gvk: gvk, synced: reg.HasSynced})
		s.mu.Unlock()
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), syncs...) {
		return ctx.Err()
	}
	s.synced.Store(true)
	log.FromContext(ctx).Info("policy inventory synced", "kinds", len(s.Kinds), "objects", s.Inventory.Stats().Objects)
	<-ctx.Done()
	return nil
}

// NeedLeaderElection: every replica that admits reads its own inventory.
func (s *Syncer) NeedLeaderElection() bool { return false }

// Synced reports whether every kind has been listed once: until then a
// policy would decide on a partial inventory.
func (s *Syncer) Synced() bool { return s.synced.Load() }

// Check is a readyz check: not ready until synced, naming the kinds not
// listed yet (a kind the admission server may not list stays there: see
// its ClusterRole).
func (s *Syncer) Check(_ any) error {
	if s.Synced() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var kinds []string
	for _, k := range s.pending {
		if !k.synced() {
			kinds = append(kinds, k.gvk.GroupKind().String())
		}
	}
	if len(kinds) == 0 {
		return errors.New("the policy inventory is not synced yet")
	}
	return fmt.Errorf("the policy inventory has not listed %s yet (policies.inventory.sync; the admission server needs list and watch on each)", strings.Join(kinds, ", "))
}

func (s *Syncer) newObject(gvk schema.GroupVersionKind) (client.Object, error) {
	if s.Scheme != nil && s.Scheme.Recognizes(gvk) {
		o, err := s.Scheme.New(gvk)
		if err == nil {
			if obj, ok := o.(client.Object); ok {
				return obj, nil
			}
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

func (s *Syncer) put(ctx context.Context, gvk schema.GroupVersionKind, o any) {
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	value, size, err := asJSON(obj)
	if err != nil {
		log.FromContext(ctx).Error(err, "converting an object for the policy inventory", "kind", gvk.Kind, "name", obj.GetName())
		return
	}
	// The API's apiVersion and kind, which typed objects from the cache
	// leave empty.
	value["apiVersion"], value["kind"] = gvk.GroupVersion().String(), gvk.Kind
	err = s.Inventory.Put(ctx, policies.InventoryObject{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), Object: value, Size: size,
	})
	if policies.IsInventoryFull(err) {
		s.fullLog.Do(func() { log.FromContext(ctx).Error(err, "policy inventory full: policies see an incomplete inventory") })
	} else if err != nil {
		log.FromContext(ctx).Error(err, "writing the policy inventory")
	}
}

func (s *Syncer) delete(ctx context.Context, gvk schema.GroupVersionKind, o any) {
	if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	if err := s.Inventory.Delete(ctx, gvk.GroupVersion().String(), gvk.Kind, obj.GetNamespace(), obj.GetName()); err != nil {
		log.FromContext(ctx).Error(err, "removing from the policy inventory")
	}
}

// asJSON returns obj as JSON values, without its managedFields (the
// inventory's largest part, of use to no policy), and its size.
func asJSON(obj client.Object) (map[string]any, int, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, 0, err
	}
	var value map[string]any
	if err := json.Unmarshal(raw, &value); err != nil {
		return nil, 0, err
	}
	if meta, ok := value["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
		if ann, ok := meta["annotations"].(map[string]any); ok {
			delete(ann, "kubectl.kubernetes.io/last-applied-configuration")
		}
	}
	return value, len(raw), nil
}

// ParseKind turns a configured kind into a GroupVersionKind.
func ParseKind(group, version, kind string) (schema.GroupVersionKind, error) {
	if version == "" || kind == "" || strings.Contains(version, "/") {
		return schema.GroupVersionKind{}, fmt.Errorf("policies.inventory.sync: %q/%q/%q: want a group (empty for the core group), a version and a kind", group, version, kind)
	}
	return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}, nil
}

// collector reports an inventory's size when scraped: nothing is counted
// on the path of an object's change.
type collector struct {
	inventory                        *policies.Inventory
	objects, bytes, dropped, missing *prometheus.Desc
}

// RegisterMetrics reports the inventory's size on reg.
func RegisterMetrics(reg prometheus.Registerer, inv *policies.Inventory) error {
	c := &collector{
		inventory: inv,
		objects:   prometheus.NewDesc("inplace_policy_inventory_objects", "Objects in the policies' data.inventory, by kind (GROUP/VERSION/KIND).", []string{"kind"}, nil),
		bytes:     prometheus.NewDesc("inplace_policy_inventory_bytes", "Size of the objects in the policies' data.inventory, as JSON.", nil, nil),
		dropped:   prometheus.NewDesc("inplace_policy_inventory_dropped_total", "Objects left out of data.inventory because it held policies.inventory.maxObjects: the policies saw an incomplete inventory.", nil, nil),
		missing:   prometheus.NewDesc("inplace_policy_inventory_missing", "Objects left out of data.inventory now, for want of room: the policies see an incomplete inventory until it is 0.", nil, nil),
	}
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("registering the policy inventory's metrics: %w", err)
	}
	return nil
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.objects
	ch <- c.bytes
	ch <- c.dropped
	ch <- c.missing
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.inventory.Stats()
	for kind, n := range s.ByKind {
		ch <- prometheus.MustNewConstMetric(c.objects, prometheus.GaugeValue, float64(n), kind)
	}
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(s.Dropped))
	ch <- prometheus.MustNewConstMetric(c.missing, prometheus.GaugeValue, float64(s.Missing))
}
