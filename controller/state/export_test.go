package state

// The child index's property tests drive it as the informers do and
// decide on what it holds. The decisions' package imports this one, so
// those tests are external (package state_test); these give them what
// they compare: the families' running totals, the same totals computed
// from scratch (family_test.go), and what the index holds.

var (
	CountedOf          = countedOf
	CountedFromScratch = countedFromScratch
	JobOwnerUID        = jobOwnerUID
)

// Sizes is how many families the index holds and how many Jobs and Pods
// it counts in them.
func (x *ChildIndex) Sizes() (families, owners int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.families), len(x.owners)
}
