package policies

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
)

// Inventory is data.inventory, the cluster objects the policies may read,
// in Gatekeeper's shape:
//
//	data.inventory.namespace[NAMESPACE][GROUP/VERSION][KIND][NAME]
//	data.inventory.cluster[GROUP/VERSION][KIND][NAME]
//
// (GROUP/VERSION is "v1" for the core group), so that a policy written for
// Gatekeeper's sync reads it unchanged.
//
// It is an OPA store of immutable snapshots: an evaluation reads the
// snapshot current when it began, whole, and holds no lock, so a slow
// policy never delays a write and a write never delays an evaluation
// (OPA's own in-memory store holds a read lock for an evaluation's whole
// run, and a waiting write holds up every evaluation after it). A write
// copies the maps along the object's path only; every other part, and the
// AST value already built of it, is shared with the snapshot before.
//
// It holds at most max objects: past it, Put leaves an object out and
// counts it, and the policies see an incomplete inventory; Stats says so
// rather than the policies deciding on a silently partial one. An object
// left out comes in at its next change once there is room.
type Inventory struct {
	storage.PolicyNotSupported
	storage.TriggersNotSupported
	storage.WritesNotSupported

	root atomic.Pointer[inventoryNode]

	mu      sync.Mutex // serializes writers
	max     int
	held    map[inventoryKey]int // bytes, roughly, by object
	bytes   int
	dropped int
	missing map[inventoryKey]bool // left out, and not deleted since
	byKind  map[string]int
}

type inventoryKey struct{ namespace, groupVersion, kind, name string }

// InventoryStats say what an inventory holds.
type InventoryStats struct {
	// Objects held, and their size as JSON, roughly.
	Objects, Bytes int
	// Dropped counts the objects ever left out because the inventory was
	// full; Missing, those left out now.
	Dropped, Missing int
	// ByKind counts the objects held by GROUP/VERSION/KIND.
	ByKind map[string]int
}

// NewInventory returns an empty inventory of at most maxObjects objects
// (0: no bound, for offline tests).
func NewInventory(maxObjects int) *Inventory {
	inv := &Inventory{max: maxObjects, held: map[inventoryKey]int{}, missing: map[inventoryKey]bool{}, byKind: map[string]int{}}
	root := &inventoryNode{children: map[string]*inventoryNode{
		"inventory": {children: map[string]*inventoryNode{
			"namespace": {children: map[string]*inventoryNode{}},
			"cluster":   {children: map[string]*inventoryNode{}},
		}},
	}}
	inv.root.Store(root)
	return inv
}

// inventoryNode is one level of a snapshot: an object (leaf) or a map of
// nodes. Immutable once published, but for its AST value, built once on
// first read.
type inventoryNode struct {
	children map[string]*inventoryNode
	leaf     ast.Value

	once  sync.Once
	value ast.Value
}

func (n *inventoryNode) ast() ast.Value {
	if n.leaf != nil {
		return n.leaf
	}
	n.once.Do(func() {
		items := make([][2]*ast.Term, 0, len(n.children))
		for k, c := range n.children {
			items = append(items, [2]*ast.Term{ast.StringTerm(k), ast.NewTerm(c.ast())})
		}
		n.value = ast.NewObject(items...)
	})
	return n.value
}

// with returns a copy of n with value at path (nil: removed), and whether
// it changed anything; the levels along the path are copied, the rest
// shared. A namespace, group/version or kind left empty is removed with
// its last object (data.inventory.namespace and .cluster stay): a churn of
// namespaces leaves nothing behind.
func (n *inventoryNode) with(path []string, leaf ast.Value) (*inventoryNode, bool) {
	return n.withAt(path, leaf, 0)
}

// keptLevels are the levels from the root never removed: inventory,
// and its namespace and cluster.
const keptLevels = 2

func (n *inventoryNode) withAt(path []string, leaf ast.Value, depth int) (*inventoryNode, bool) {
	child, ok := n.children[path[0]]
	var next *inventoryNode
	switch {
	case len(path) == 1 && leaf != nil:
		next = &inventoryNode{leaf: leaf}
	case len(path) == 1:
		if !ok {
			return n, false
		}
	case !ok && leaf == nil:
		return n, false
	default:
		if !ok {
			child = &inventoryNode{children: map[string]*inventoryNode{}}
		}
		var changed bool
		if next, changed = child.withAt(path[1:], leaf, depth+1); !changed {
			return n, false
		}
		if len(next.children) == 0 && depth >= keptLevels {
			next = nil
		}
	}
	children := make(map[string]*inventoryNode, len(n.children)+1)
	for k, c := range n.children {
		children[k] = c
	}
	if next == nil {
		delete(children, path[0])
	} else {
		children[path[0]] = next
	}
	return &inventoryNode{children: children}, true
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

func (k inventoryKey) path() []string {
	if k.namespace == "" {
		return []string{"inventory", "cluster", k.groupVersion, k.kind, k.name}
	}
	return []string{"inventory", "namespace", k.namespace, k.groupVersion, k.kind, k.name}
}

// errInventoryFull is returned by Put for an object left out.
var errInventoryFull = errors.New("the inventory is full")

// IsInventoryFull reports whether err says an object was left out.
func IsInventoryFull(err error) bool { return errors.Is(err, errInventoryFull) }

// Put adds or replaces an object.
func (inv *Inventory) Put(_ context.Context, obj InventoryObject) error {
	if obj.APIVersion == "" || obj.Kind == "" || obj.Name == "" {
		return fmt.Errorf("inventory object without apiVersion, kind or name: %q %q %q", obj.APIVersion, obj.Kind, obj.Name)
	}
	value, err := ast.InterfaceToValue(obj.Object)
	if err != nil {
		return fmt.Errorf("converting %s %s for the inventory: %w", obj.Kind, obj.Name, err)
	}
	k := obj.key()
	inv.mu.Lock()
	defer inv.mu.Unlock()
	old, replacing := inv.held[k]
	if !replacing && inv.max > 0 && len(inv.held) >= inv.max {
		if !inv.missing[k] {
			inv.dropped++
			inv.missing[k] = true
		}
		return fmt.Errorf("%w (%d objects): %s %s left out; raise policies.inventory.maxObjects or sync fewer kinds", errInventoryFull, inv.max, obj.Kind, strings.TrimPrefix(obj.Namespace+"/"+obj.Name, "/"))
	}
	root, _ := inv.root.Load().with(k.path(), value)
	inv.root.Store(root)
	delete(inv.missing, k)
	if !replacing {
		inv.byKind[k.groupVersion+"/"+k.kind]++
	}
	inv.held[k] = obj.Size
	inv.bytes += obj.Size - old
	return nil
}

// Delete removes an object; one not held is no error.
func (inv *Inventory) Delete(_ context.Context, apiVersion, kind, namespace, name string) error {
	k := inventoryKey{namespace, apiVersion, kind, name}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	delete(inv.missing, k)
	size, ok := inv.held[k]
	if !ok {
		return nil
	}
	root, _ := inv.root.Load().with(k.path(), nil)
	inv.root.Store(root)
	delete(inv.held, k)
	if inv.byKind[k.groupVersion+"/"+k.kind]--; inv.byKind[k.groupVersion+"/"+k.kind] == 0 {
		delete(inv.byKind, k.groupVersion+"/"+k.kind)
	}
	inv.bytes -= size
	return nil
}

// inventoryLeaf is an object to set at a path, or nil to remove what is
// there.
type inventoryLeaf struct {
	path []string
	leaf ast.Value
}

// mirror applies changes, in order, as the engine's inventory made them:
// an evaluator process's copy, whose bound and counts are the engine's.
// The changes are published once, and a level is copied once however many
// of them it takes: a new evaluator gets every object at once.
func (inv *Inventory) mirror(changes []inventoryLeaf) {
	if len(changes) == 0 {
		return
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	owned := map[*inventoryNode]bool{}
	own := func(n *inventoryNode) *inventoryNode {
		if owned[n] {
			return n
		}
		c := &inventoryNode{children: maps.Clone(n.children)}
		if c.children == nil {
			c.children = map[string]*inventoryNode{}
		}
		owned[c] = true
		return c
	}
	root := own(inv.root.Load())
	for _, c := range changes {
		setOwned(root, c.path, c.leaf, 0, own)
	}
	inv.root.Store(root)
}

// setOwned sets leaf at path below n, which the caller owns, copying each
// level it changes once (own); a level left empty is removed, as with
// does.
func setOwned(n *inventoryNode, path []string, leaf ast.Value, depth int, own func(*inventoryNode) *inventoryNode) {
	if len(path) == 1 {
		if leaf == nil {
			delete(n.children, path[0])
		} else {
			n.children[path[0]] = &inventoryNode{leaf: leaf}
		}
		return
	}
	child, ok := n.children[path[0]]
	if !ok {
		if leaf == nil {
			return
		}
		child = &inventoryNode{}
	}
	child = own(child)
	n.children[path[0]] = child
	setOwned(child, path[1:], leaf, depth+1, own)
	if len(child.children) == 0 && depth >= keptLevels {
		delete(n.children, path[0])
	}
}

// snapshot is the inventory's current tree, for inventoryChanges.
func (inv *Inventory) snapshot() *inventoryNode { return inv.root.Load() }

// inventoryChanges calls emit with each object set or removed between two
// snapshots of one inventory (from nil: every object). Parts the two
// share are skipped whole: a write copies only the levels along its path.
func inventoryChanges(from, to *inventoryNode, emit func(path []string, leaf ast.Value)) {
	changesAt(from, to, nil, emit)
}

func changesAt(from, to *inventoryNode, path []string, emit func([]string, ast.Value)) {
	switch {
	case from == to:
		return
	case to == nil:
		emit(path, nil)
		return
	case to.leaf != nil:
		emit(path, to.leaf)
		return
	}
	var before map[string]*inventoryNode
	if from != nil {
		before = from.children
	}
	for k, c := range to.children {
		changesAt(before[k], c, append(path[:len(path):len(path)], k), emit)
	}
	for k := range before {
		if _, ok := to.children[k]; !ok {
			emit(append(path[:len(path):len(path)], k), nil)
		}
	}
}

// Stats says what the inventory holds.
func (inv *Inventory) Stats() InventoryStats {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return InventoryStats{Objects: len(inv.held), Bytes: inv.bytes, Dropped: inv.dropped, Missing: len(inv.missing), ByKind: maps.Clone(inv.byKind)}
}

// The OPA store the policies read: each transaction a snapshot.

type inventoryTxn struct {
	id   uint64
	root *inventoryNode
}

func (t *inventoryTxn) ID() uint64 { return t.id }

var inventoryTxnIDs atomic.Uint64

// NewTransaction begins a read of the current snapshot. Nothing writes
// through the store: the inventory's own methods do.
func (inv *Inventory) NewTransaction(_ context.Context, params ...storage.TransactionParams) (storage.Transaction, error) {
	for _, p := range params {
		if p.Write {
			return nil, errors.New("the policies' inventory is written by the manager's sync alone")
		}
	}
	return &inventoryTxn{id: inventoryTxnIDs.Add(1), root: inv.root.Load()}, nil
}

// Read returns the value at path in the transaction's snapshot, as an AST
// value built once per snapshot part and shared by every evaluation.
func (inv *Inventory) Read(_ context.Context, txn storage.Transaction, path storage.Path) (any, error) {
	t, ok := txn.(*inventoryTxn)
	if !ok {
		return nil, errors.New("not a transaction of the policies' inventory")
	}
	n := t.root
	for i, seg := range path {
		if n.leaf != nil {
			return readValue(n.leaf, path, i)
		}
		next, ok := n.children[seg]
		if !ok {
			return nil, notFound(path)
		}
		n = next
	}
	return n.ast(), nil
}

// readValue descends into an object's value from path[i] on.
func readValue(v ast.Value, path storage.Path, i int) (any, error) {
	for _, seg := range path[i:] {
		switch x := v.(type) {
		case ast.Object:
			t := x.Get(ast.StringTerm(seg))
			if t == nil {
				return nil, notFound(path)
			}
			v = t.Value
		case *ast.Array:
			idx, err := strconv.Atoi(seg)
			if err != nil || idx < 0 || idx >= x.Len() {
				return nil, notFound(path)
			}
			v = x.Elem(idx).Value
		default:
			return nil, notFound(path)
		}
	}
	return v, nil
}

// Commit ends a transaction; there is nothing to write.
func (inv *Inventory) Commit(context.Context, storage.Transaction) error { return nil }

// Abort ends a transaction.
func (inv *Inventory) Abort(context.Context, storage.Transaction) {}

// Truncate is not supported: the sync writes the inventory.
func (inv *Inventory) Truncate(context.Context, storage.Transaction, storage.TransactionParams, storage.Iterator) error {
	return errors.New("the policies' inventory is written by the manager's sync alone")
}

// ListPolicies: the inventory holds no modules.
func (inv *Inventory) ListPolicies(context.Context, storage.Transaction) ([]string, error) {
	return nil, nil
}

func notFound(path storage.Path) error {
	return &storage.Error{Code: storage.NotFoundErr, Message: path.String() + ": document does not exist"}
}
