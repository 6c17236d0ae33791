package restartbench

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// jobSetWatch records when the JobSet's status changed as a restart
// progresses. A change is timed when the informer delivers it: should the
// API server end the watch during a restart, the time to watch again is in
// the times measured from it, which it can only lengthen; the times of its
// lists and watches are kept, so that a restart can tell.
type jobSetWatch struct {
	mu      sync.Mutex
	latest  jobset.JobSetStatus
	changes []statusAt

	lw     *countingListWatch
	cancel context.CancelFunc
	done   chan struct{}
}

type statusAt struct {
	at     time.Time
	status jobset.JobSetStatus
}

// jobSetSyncTimeout bounds the first list of the JobSet: an informer whose
// list fails (the API not served, access refused) tries again forever.
const jobSetSyncTimeout = 2 * time.Minute

// watchJobSet records the JobSet's status until its stop is called.
func (e *env) watchJobSet(ctx context.Context, js *jobset.JobSet) (*jobSetWatch, error) {
	// The closures keep their own copies of the name and namespace: the
	// caller's JobSet is written by its create.
	name, namespace := js.Name, js.Namespace
	byName := func(opts metav1.ListOptions) *client.ListOptions {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		// controller-runtime writes its own limit and continue token over
		// Raw's: the reflector's are passed as its own.
		return &client.ListOptions{Namespace: namespace, Limit: opts.Limit, Continue: opts.Continue, Raw: &opts}
	}
	return followJobSet(ctx, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := &jobset.JobSetList{}
			return list, e.client.List(ctx, list, byName(opts))
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return e.client.Watch(ctx, &jobset.JobSetList{}, byName(opts))
		},
	}, namespace, name)
}

// countingListWatch records when each list and watch of lw began, and
// keeps the last failure of either: the reflector tries a failed call
// again on its own and reports why only to its log, which the benchmark
// does not print.
//
// It has the reflector list and then watch, rather than stream the list
// through a watch: one JobSet is a small list, and the follower is tested
// on this path.
type countingListWatch struct {
	lw cache.ListerWatcherWithContext

	mu sync.Mutex
	// at is when each call began: a handful per restart.
	at []time.Time
	// lastErr is the last call's failure, unless its context had ended,
	// which says nothing of why.
	lastErr error
}

// call records a call of lw beginning, and returns what records its end.
func (c *countingListWatch) call(ctx context.Context) func(error) {
	c.mu.Lock()
	c.at = append(c.at, time.Now())
	c.mu.Unlock()
	return func(err error) {
		if err != nil && ctx.Err() == nil {
			c.mu.Lock()
			c.lastErr = err
			c.mu.Unlock()
		}
	}
}

// between counts the calls begun from from to to.
func (c *countingListWatch) between(from, to time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.at {
		if !t.Before(from) && !t.After(to) {
			n++
		}
	}
	return n
}

func (c *countingListWatch) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

func (c *countingListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	done := c.call(ctx)
	obj, err := c.lw.ListWithContext(ctx, opts)
	done(err)
	return obj, err
}

func (c *countingListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	done := c.call(ctx)
	w, err := c.lw.WatchWithContext(ctx, opts)
	done(err)
	return w, err
}

// List and Watch make it a cache.ListerWatcher; the reflector calls the
// context's forms above.
func (c *countingListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return c.ListWithContext(context.Background(), opts)
}

func (c *countingListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return c.WatchWithContext(context.Background(), opts)
}

func (*countingListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// followJobSet records the status of the JobSet named name that lw lists
// and watches, until the returned watch's stop. An informer, not one
// watch: the API server ends watches (when their timeout, which the
// reflector sets at 5 to 10 minutes, passes; when it restarts; when a
// watcher falls behind), and a status left stale by a watch that ended
// would hold the benchmark's waits until they time out.
func followJobSet(ctx context.Context, lw cache.ListerWatcher, namespace, name string) (*jobSetWatch, error) {
	jw := &jobSetWatch{lw: &countingListWatch{lw: cache.ToListerWatcherWithContext(lw)}, done: make(chan struct{})}
	// The field selector of lw lists only the JobSet named name: every
	// object delivered is it.
	record := func(obj any) {
		got, ok := obj.(*jobset.JobSet)
		if !ok {
			return
		}
		now := time.Now()
		status := got.Status
		// Upstream JobSet writes its in-place restart attempts, not the
		// epochs: the epochs they stand for are what is timed.
		if jobset.WrittenByUpstream(&status) {
			status.DeprecatedEpoch, status.SyncedEpoch = jobset.UpstreamEpochs(&status)
		}
		jw.mu.Lock()
		jw.latest = status
		jw.changes = append(jw.changes, statusAt{now, status})
		jw.mu.Unlock()
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: jw.lw, ObjectType: &jobset.JobSet{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    record,
			UpdateFunc: func(_, obj any) { record(obj) },
		},
	})
	var runCtx context.Context
	runCtx, jw.cancel = context.WithCancel(ctx)
	go func() {
		defer close(jw.done)
		informer.RunWithContext(runCtx)
	}()
	syncCtx, cancelSync := context.WithTimeout(runCtx, jobSetSyncTimeout)
	defer cancelSync()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		jw.stop()
		if last := jw.lw.failure(); last != nil {
			return nil, fmt.Errorf("listing JobSet %s/%s: %w; the last list or watch failed: %w", namespace, name, context.Cause(syncCtx), last)
		}
		return nil, fmt.Errorf("listing JobSet %s/%s: %w", namespace, name, context.Cause(syncCtx))
	}
	return jw, nil
}

// stop ends the informer and returns once it has.
func (jw *jobSetWatch) stop() {
	jw.cancel()
	<-jw.done
}

// callsBetween is how many lists and watches the informer began from
// from to to.
func (jw *jobSetWatch) callsBetween(from, to time.Time) int { return jw.lw.between(from, to) }

// first returns when the status first met cond after t0.
func (jw *jobSetWatch) first(t0 time.Time, cond func(jobset.JobSetStatus) bool) time.Time {
	jw.mu.Lock()
	defer jw.mu.Unlock()
	for _, c := range jw.changes {
		if !c.at.Before(t0) && cond(c.status) {
			return c.at
		}
	}
	return time.Time{}
}

func (jw *jobSetWatch) status() jobset.JobSetStatus {
	jw.mu.Lock()
	defer jw.mu.Unlock()
	return jw.latest
}
