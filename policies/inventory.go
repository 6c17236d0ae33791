package policies

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

// Inventory is data.inventory, the cluster objects the policies may read,
// in Gatekeeper's shape:
//
//	data.inventory.namespace[NAMESPACE][GROUP/VERSION][KIND][NAME]
//	data.inventory.cluster[GROUP/VERSION][KIND][NAME]
//
// (GROUP/VERSION is "v1" for the core group), so that a policy written for
// Gatekeeper's sync reads it unchanged. It is an OPA store that every
// admin policy of an engine is prepared with: an evaluation reads it in a
// transaction of its own, and sees each object whole or not at all.
//
// It holds at most max objects: past it, Put leaves an object out and
// counts it, and the policies see an incomplete inventory; the count says
// so (Stats) rather than the policies deciding on a silently partial one.
type Inventory struct {
	store storage.Store

	mu      sync.Mutex
	max     int
	held    map[inventoryKey]int // bytes, roughly, by object
	bytes   int
	dropped int
}

type inventoryKey struct{ namespace, groupVersion, kind, name string }

// InventoryStats say what an inventory holds.
type InventoryStats struct {
	// Objects held, and their size as JSON, roughly.
	Objects, Bytes int
	// Dropped counts the objects left out because the inventory was full.
	Dropped int
	// ByKind counts the objects held by GROUP/VERSION/KIND.
	ByKind map[string]int
}

// NewInventory returns an empty inventory of at most maxObjects objects
// (0: no bound, for offline tests).
func NewInventory(maxObjects int) *Inventory {
	store := inmem.NewFromObjectWithOpts(map[string]any{
		"inventory": map[string]any{"namespace": map[string]any{}, "cluster": map[string]any{}},
	},
		// The objects come from the API as JSON values already; policies
		// read them as AST values, converted once when written rather than
		// on every read.
		inmem.OptRoundTripOnWrite(false),
		inmem.OptReturnASTValuesOnRead(true),
	)
	return &Inventory{store: store, max: maxObjects, held: map[inventoryKey]int{}}
}

// SetMaxObjects bounds the objects held from now on (0: no bound); those
// held already stay.
func (inv *Inventory) SetMaxObjects(n int) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.max = n
}

// InventoryObject is one object to hold: its identity and its JSON value.
type InventoryObject struct {
	// APIVersion ("v1", "group/version") and Kind of the object.
	APIVersion, Kind string
	// Namespace is empty for a cluster-scoped object.
	Namespace, Name string
	// Object is the object as JSON values (maps, slices, strings,
	// json.Number or float64, bools).
	Object map[string]any
	// Size is its size as JSON, for the memory report.
	Size int
}

func (o *InventoryObject) key() inventoryKey {
	return inventoryKey{o.Namespace, o.APIVersion, o.Kind, o.Name}
}

func (k inventoryKey) path() storage.Path {
	if k.namespace == "" {
		return storage.Path{"inventory", "cluster", k.groupVersion, k.kind, k.name}
	}
	return storage.Path{"inventory", "namespace", k.namespace, k.groupVersion, k.kind, k.name}
}

// errInventoryFull is returned by Put for an object left out.
var errInventoryFull = errors.New("the inventory is full")

// IsInventoryFull reports whether err says an object was left out.
func IsInventoryFull(err error) bool { return errors.Is(err, errInventoryFull) }

// Put adds or replaces an object.
func (inv *Inventory) Put(ctx context.Context, obj InventoryObject) error {
	if obj.APIVersion == "" || obj.Kind == "" || obj.Name == "" {
		return fmt.Errorf("inventory object without apiVersion, kind or name: %q %q %q", obj.APIVersion, obj.Kind, obj.Name)
	}
	k := obj.key()
	inv.mu.Lock()
	defer inv.mu.Unlock()
	old, replacing := inv.held[k]
	if !replacing && inv.max > 0 && len(inv.held) >= inv.max {
		inv.dropped++
		return fmt.Errorf("%w (%d objects): %s %s left out; raise policies.inventory.maxObjects or sync fewer kinds", errInventoryFull, inv.max, obj.Kind, strings.TrimPrefix(obj.Namespace+"/"+obj.Name, "/"))
	}
	path := k.path()
	err := storage.Txn(ctx, inv.store, storage.WriteParams, func(txn storage.Transaction) error {
		if err := storage.MakeDir(ctx, inv.store, txn, path[:len(path)-1]); err != nil {
			return err
		}
		return inv.store.Write(ctx, txn, storage.AddOp, path, obj.Object)
	})
	if err != nil {
		return fmt.Errorf("writing %s into the inventory: %w", path, err)
	}
	inv.held[k] = obj.Size
	inv.bytes += obj.Size - old
	return nil
}

// Delete removes an object; one not held is no error.
func (inv *Inventory) Delete(ctx context.Context, apiVersion, kind, namespace, name string) error {
	k := inventoryKey{namespace, apiVersion, kind, name}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	size, ok := inv.held[k]
	if !ok {
		return nil
	}
	if err := storage.WriteOne(ctx, inv.store, storage.RemoveOp, k.path(), nil); err != nil && !storage.IsNotFound(err) {
		return fmt.Errorf("removing %s from the inventory: %w", k.path(), err)
	}
	delete(inv.held, k)
	inv.bytes -= size
	return nil
}

// Stats says what the inventory holds.
func (inv *Inventory) Stats() InventoryStats {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	s := InventoryStats{Objects: len(inv.held), Bytes: inv.bytes, Dropped: inv.dropped, ByKind: map[string]int{}}
	for k := range inv.held {
		s.ByKind[k.groupVersion+"/"+k.kind]++
	}
	return s
}
