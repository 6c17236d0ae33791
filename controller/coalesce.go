package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// statusCoalescing is the least time between two status writes of a
// JobSet that change nothing but its replicated jobs' counters.
const statusCoalescing = time.Second

// countersOnly reports whether two statuses differ only in what the
// replicated jobs' Jobs report (ready, active, succeeded, failed,
// suspended). A Job's restart (jobRestarts) is a decision, not a count: its
// write is never held back.
func countersOnly(a, b jobset.JobSetStatus) bool {
	a.ReplicatedJobsStatus, b.ReplicatedJobsStatus = decisionsOf(a.ReplicatedJobsStatus), decisionsOf(b.ReplicatedJobsStatus)
	return equality.Semantic.DeepEqual(a, b)
}

// decisionsOf keeps of replicated jobs' statuses what the controller
// decided: their names and their Jobs' restarts.
func decisionsOf(statuses []jobset.ReplicatedJobStatus) []jobset.ReplicatedJobStatus {
	out := make([]jobset.ReplicatedJobStatus, 0, len(statuses))
	for _, s := range statuses {
		out = append(out, jobset.ReplicatedJobStatus{Name: s.Name, JobRestarts: s.JobRestarts, JobRestartsCountTowardsMax: s.JobRestartsCountTowardsMax})
	}
	return out
}

// inPlaceRestarting reports whether an in-place restart is under way: an
// epoch deprecated and the next not yet synced.
func inPlaceRestarting(s jobset.JobSetStatus) bool {
	return s.SyncedEpoch > 0 && s.DeprecatedEpoch >= s.SyncedEpoch
}

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

// jobSetTimes remembers, per JobSet, when its status was last written and
// when its last full reconcile ended and how long it took. A JobSet
// recreated under the same name inherits them, which delays its first
// counter-only write by at most statusCoalescing and its first paced
// reconcile by at most maxPace.
type jobSetTimes struct {
	mu   sync.Mutex
	last map[types.NamespacedName]times
}

type times struct {
	wrote, ended time.Time
	took         time.Duration
}

func newJobSetTimes() *jobSetTimes {
	return &jobSetTimes{last: map[types.NamespacedName]times{}}
}

// writeWait is how long a counters-only write of the JobSet must still
// wait.
func (j *jobSetTimes) writeWait(key types.NamespacedName, now time.Time) time.Duration {
	t := j.get(key)
	if t.wrote.IsZero() {
		return 0
	}
	return max(0, t.wrote.Add(statusCoalescing).Sub(now))
}

func (j *jobSetTimes) wrote(key types.NamespacedName, now time.Time) {
	j.update(key, func(t *times) { t.wrote = now })
}

// paceWait is how long the next full reconcile of the JobSet should still
// wait at now, during an in-place restart: zero when it may run.
func (j *jobSetTimes) paceWait(key types.NamespacedName, now time.Time) time.Duration {
	t := j.get(key)
	if t.ended.IsZero() {
		return 0
	}
	return max(0, t.ended.Add(min(paceFactor*t.took, maxPace)).Sub(now))
}

// ran records a full reconcile of the JobSet from start to end.
func (j *jobSetTimes) ran(key types.NamespacedName, start, end time.Time) {
	j.update(key, func(t *times) { t.ended, t.took = end, end.Sub(start) })
}

func (j *jobSetTimes) forget(key types.NamespacedName) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.last, key)
}

func (j *jobSetTimes) get(key types.NamespacedName) times {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last[key]
}

func (j *jobSetTimes) update(key types.NamespacedName, f func(*times)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t := j.last[key]
	f(&t)
	j.last[key] = t
}
