package main

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/perf/bench/stats"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/reconciler"
	"github.com/inplace-dev/inplace/policies/review"
	"github.com/inplace-dev/inplace/test/framework"
)

// guardRego is a typical guardrail with parameters: a restart budget.
const guardRego = `package guardrails.p%d

deny contains msg if {
	input.object.spec.failurePolicy.maxRestarts > input.parameters.limit
	msg := sprintf("spec.failurePolicy.maxRestarts is %%d, above this cluster's limit of %%d: lower it", [input.object.spec.failurePolicy.maxRestarts, input.parameters.limit])
}
`

// guards compiles n guardrails; match, if set, selects the JobSets each
// applies to.
func guards(n int, limit int, match func(policies.Input) bool) ([]*policies.Policy, error) {
	out := make([]*policies.Policy, 0, n)
	for i := range n {
		p, err := policies.Compile(policies.Source{Name: fmt.Sprintf("p%04d", i), Rego: fmt.Sprintf(guardRego, i), Match: match, Parameters: map[string]any{"limit": limit}})
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// policyScaling evaluates a JobSet with N admin policies, every one
// matching or none, and reports per request the latency, the bytes
// allocated, and the heap the compiled policies hold.
func policyScaling(ctx context.Context, obj map[string]any, iterations int) ([]stats.Summary, error) {
	var rows []stats.Summary
	for _, n := range []int{1, 100, 1000} {
		// In process, as inplacectl evaluates, and in evaluator
		// processes, as the manager does by default; a policy that does
		// not match costs no evaluator.
		for _, c := range []struct{ matching, isolated bool }{{true, false}, {false, false}, {true, true}} {
			matching := c.matching
			before := heapInUse()
			engine, err := policies.NewEngine(nil)
			if err != nil {
				return nil, err
			}
			if c.isolated {
				if err := engine.Isolate(policies.IsolationOptions{}); err != nil {
					return nil, err
				}
			}
			var match func(policies.Input) bool
			if !matching {
				match = func(in policies.Input) bool { return in.Namespace == "elsewhere" }
			}
			ps, err := guards(n, 100, match)
			if err != nil {
				return nil, err
			}
			for _, p := range ps {
				engine.SetPolicy(p)
			}
			held := heapInUse() - before
			count := max(iterations/max(n/10, 1), 50)
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			allocated := ms.TotalAlloc
			samples := make([]time.Duration, 0, count)
			for i := 0; i < count+count/10; i++ {
				t0 := time.Now()
				if _, err := engine.Evaluate(ctx, review.Offline("CREATE", "default", obj, nil, nil)); err != nil {
					return nil, err
				}
				if i >= count/10 {
					samples = append(samples, time.Since(t0))
				}
			}
			runtime.ReadMemStats(&ms)
			perRequest := float64(ms.TotalAlloc-allocated) / float64(count+count/10)
			name := fmt.Sprintf("evaluate, %d policies, matching %v", n, matching)
			if c.isolated {
				name += ", isolated"
			}
			row := stats.Summarize(name, samples)
			row.Extra = fmt.Sprintf("%.1f MiB allocated per request, %.1f MiB held by the policies", perRequest/(1<<20), float64(held)/(1<<20))
			if c.isolated {
				row.Extra = fmt.Sprintf("%.1f MiB allocated per request in this process", perRequest/(1<<20))
			}
			rows = append(rows, row)
			engine.Close()
			runtime.KeepAlive(engine)
		}
	}
	return rows, nil
}

// auditResult is one audit of many JobSets.
type auditResult struct {
	JobSets   int     `json:"jobsets"`
	Policies  int     `json:"policies"`
	Isolated  bool    `json:"isolated"`
	Workers   int     `json:"workers"`
	Seconds   float64 `json:"seconds"`
	Violating int     `json:"violationsOfTheFirstPolicy"`
	HeapMiB   float64 `json:"heapGrowthMiB"`
	AllocMiB  float64 `json:"allocatedMiB"`
	Complete  bool    `json:"complete"`
}

// audit creates jobsets JobSets in a real apiserver, half of them over the
// policies' limit, reads them into a cache as the manager does, and times
// one audit with 1 and with 100 policies.
func audit(ctx context.Context, root string, jobsets int) ([]auditResult, error) {
	cfg, c, stop, err := startAPIServer(5000)
	if err != nil {
		return nil, err
	}
	defer stop()
	template, err := readSpec(root, "inplace-story1.yaml")
	if err != nil {
		return nil, err
	}
	template.Namespace = "default"
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		first atomic.Value
	)
	for range 50 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < jobsets; i = int(next.Add(1)) - 1 {
				js := template.DeepCopy()
				js.Name = fmt.Sprintf("audit-%05d", i)
				if js.Spec.FailurePolicy == nil {
					js.Spec.FailurePolicy = &jobset.FailurePolicy{}
				}
				js.Spec.FailurePolicy.MaxRestarts = int32(i % 20)
				if err := c.Create(ctx, js); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return nil, fmt.Errorf("creating the JobSets: %w", err)
	}

	informers, err := cache.New(cfg, cache.Options{Scheme: framework.Scheme})
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = informers.Start(cctx) }()
	for _, obj := range []client.Object{&jobset.JobSet{}, &policyv1alpha1.JobSetPolicy{}} {
		if _, err := informers.GetInformer(ctx, obj); err != nil {
			return nil, err
		}
	}
	if !informers.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the cache did not sync")
	}
	reader, err := client.New(cfg, client.Options{Scheme: framework.Scheme, Cache: &client.CacheOptions{Reader: informers}})
	if err != nil {
		return nil, err
	}

	var out []auditResult
	for _, run := range []struct {
		n        int
		isolated bool
	}{{1, false}, {100, false}, {1, true}, {100, true}} {
		n := run.n
		engine, err := policies.NewEngine(nil)
		if err != nil {
			return nil, err
		}
		if run.isolated {
			if err := engine.Isolate(policies.IsolationOptions{}); err != nil {
				return nil, err
			}
		}
		ps, err := guards(n, 9, nil)
		if err != nil {
			return nil, err
		}
		for i, p := range ps {
			engine.SetPolicy(p)
			if err := c.Create(ctx, &policyv1alpha1.JobSetPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: p.Name},
				Spec:       policyv1alpha1.JobSetPolicySpec{Rego: fmt.Sprintf(guardRego, i)},
			}); client.IgnoreAlreadyExists(err) != nil {
				return nil, err
			}
		}
		// Wait until the cache holds the policies.
		for {
			var list policyv1alpha1.JobSetPolicyList
			if err := reader.List(ctx, &list); err != nil {
				return nil, err
			}
			if len(list.Items) >= n {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		a := &reconciler.Auditor{Client: reader, Engine: engine, Interval: 30 * time.Minute, Clock: clock.RealClock{}}
		before := heapInUse()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		allocated := ms.TotalAlloc
		start := time.Now()
		if err := a.Audit(ctx); err != nil {
			return nil, err
		}
		took := time.Since(start)
		runtime.ReadMemStats(&ms)
		var p policyv1alpha1.JobSetPolicy
		if err := c.Get(ctx, client.ObjectKey{Name: "p0000"}, &p); err != nil {
			return nil, err
		}
		engine.Close()
		r := auditResult{JobSets: jobsets, Policies: n, Isolated: run.isolated, Workers: reconciler.DefaultAuditWorkers(), Seconds: took.Seconds(),
			HeapMiB: float64(int64(heapInUse())-int64(before)) / (1 << 20), AllocMiB: float64(ms.TotalAlloc-allocated) / (1 << 20)}
		if p.Status.Audit != nil {
			r.Violating, r.Complete = int(p.Status.Audit.TotalViolations), !p.Status.Audit.Incomplete
		}
		out = append(out, r)
	}
	return out, nil
}

func auditTable(rows []auditResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %-9s %-9s %-8s %-10s %-12s %-14s %-16s %s\n", "JobSets", "policies", "isolated", "workers", "seconds", "violations", "allocated MiB", "heap growth MiB", "complete")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-10d %-9d %-9v %-8d %-10.1f %-12d %-14.0f %-16.1f %v\n", r.JobSets, r.Policies, r.Isolated, r.Workers, r.Seconds, r.Violating, r.AllocMiB, r.HeapMiB, r.Complete)
	}
	return b.String()
}
