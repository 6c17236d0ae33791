package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// During an in-place restart every Pod of the JobSet changes several times
// (its containers stop and start, its agent reports the new epoch), and a
// reconcile reads and decides over all N Pods: reconciled on every change,
// a JobSet of N Pods costs O(N²) over a restart, and at N = 5,000 the
// controller alone would keep a core busy. So while an in-place restart is
// under way a JobSet is reconciled at most once per paceFactor times the
// duration of its last reconcile: the controller's share of a core for it
// stays under 1/(paceFactor+1), and the restart's end (the last epoch
// reported) is seen that much later at most — a few milliseconds for small
// JobSets, bounded by maxPace for any. Detection is not paced: the reconcile
// that deprecates the epoch runs before the restart is under way.
const (
	paceFactor = 4
	maxPace    = 500 * time.Millisecond
)

// reconcilePace remembers, per JobSet, when its last full reconcile ended
// and how long it took.
type reconcilePace struct {
	mu   sync.Mutex
	last map[types.NamespacedName]paced
}

type paced struct {
	ended time.Time
	took  time.Duration
}

func newReconcilePace() *reconcilePace {
	return &reconcilePace{last: map[types.NamespacedName]paced{}}
}

// wait is how long the next full reconcile of the JobSet should still wait
// at now: zero when it may run.
func (p *reconcilePace) wait(key types.NamespacedName, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.last[key]
	if !ok {
		return 0
	}
	gap := min(paceFactor*last.took, maxPace)
	return max(0, last.ended.Add(gap).Sub(now))
}

// ran records a full reconcile of the JobSet that started at start and
// ended at end.
func (p *reconcilePace) ran(key types.NamespacedName, start, end time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[key] = paced{ended: end, took: end.Sub(start)}
}

func (p *reconcilePace) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, key)
}
