//go:build linux

package policies

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// isolatedEngine is an engine with every built-in, evaluating in
// evaluator processes: this test binary, started again.
func isolatedEngine(t *testing.T, opts IsolationOptions, disabled ...string) *Engine {
	t.Helper()
	e, err := NewEngine(disabled)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Isolate(opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// requestsSent is how many requests the engine's evaluator processes
// were sent: a test that isolates proves nothing if it is 0.
func requestsSent(e *Engine) int {
	pool := e.processes.Load()
	pool.mu.Lock()
	defer pool.mu.Unlock()
	return pool.requests
}

// sharedArrays are Rego statements that build NAME0..NAMEn, each an array
// of the one before twice: a value of n steps with 2^n paths to its leaf.
func sharedArrays(name string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\t%s0 := [1]\n", name)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "\t%s%d := array.concat([%s%d], [%s%d])\n", name, i, name, i-1, name, i-1)
	}
	return b.String()
}

const (
	// inventoryPolicy denies a JobSet whose namespace is not in the
	// inventory, and one whose name another JobSet's annotation claims.
	inventoryPolicy = `package inv

deny contains "namespace not in the inventory" if {
	not data.inventory.cluster.v1.Namespace[input.object.metadata.namespace]
}

deny contains sprintf("name claimed by %s", [other]) if {
	some other, js in data.inventory.namespace[input.object.metadata.namespace]["jobset.x-k8s.io/v1alpha2"].JobSet
	js.metadata.annotations.claims == input.object.metadata.name
}
`
	// podPolicy warns of every container without a memory limit.
	podPolicy = `package pods

warn contains sprintf("container %s has no memory limit", [c.name]) if {
	some c in input.object.spec.containers
	not c.resources.limits.memory
}
`
	// allowAll decides nothing, but is evaluated.
	allowAll = `package quiet

deny contains "never" if { false }
`
)

func TestIsolatedEngineDecidesAsInProcess(t *testing.T) {
	ctx := context.Background()
	inProcess, err := NewEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	isolated := isolatedEngine(t, IsolationOptions{})
	for _, e := range []*Engine{inProcess, isolated} {
		for _, src := range []Source{
			{Name: "max-restarts", Rego: maxRestartsPolicy, Parameters: map[string]any{"limit": 5}},
			{Name: "max-restarts-warn", Rego: strings.Replace(maxRestartsPolicy, "maxrestarts", "maxrestartswarn", 1), Action: Warn, Parameters: map[string]any{"limit": 1.5}},
			{Name: "inventory", Rego: inventoryPolicy, Action: DryRun},
			{Name: "pods", Rego: podPolicy, Target: TargetPodTemplates},
		} {
			p, err := e.Compile(src)
			if err != nil {
				t.Fatal(err)
			}
			e.SetPolicy(p)
		}
		if err := e.Inventory().Put(ctx, InventoryObject{APIVersion: "v1", Kind: "Namespace", Name: "default", Object: map[string]any{"metadata": map[string]any{"name": "default"}}}); err != nil {
			t.Fatal(err)
		}
		if err := e.Inventory().Put(ctx, InventoryObject{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Namespace: "default", Name: "other",
			Object: map[string]any{"metadata": map[string]any{"name": "other", "annotations": map[string]any{"claims": "failurepolicy-story1"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	specs, err := filepath.Glob(filepath.Join("..", "test", "testdata", "specs", "*.yaml"))
	if err != nil || len(specs) == 0 {
		t.Fatalf("no specs: %v", err)
	}
	var inputs []Input
	for _, spec := range specs {
		for _, ns := range []string{"default", "elsewhere"} {
			obj := admitted(t, filepath.Base(spec), func(js *jobset.JobSet) { js.Namespace = ns })
			inputs = append(inputs,
				Input{Operation: "CREATE", Object: obj, Namespace: ns},
				Input{Operation: "UPDATE", Object: obj, OldObject: admitted(t, filepath.Base(spec), nil), Namespace: ns})
		}
	}
	// Something to deny in a built-in, too.
	inputs = append(inputs, Input{Operation: "CREATE", Object: admitted(t, "inplace-story1.yaml", func(js *jobset.JobSet) {
		zero := int32(0)
		js.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = &zero
	})})
	var decided int
	for i, in := range inputs {
		want, wantErr := inProcess.Evaluate(ctx, in)
		got, gotErr := isolated.Evaluate(ctx, in)
		if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) || !reflect.DeepEqual(want, got) {
			t.Errorf("input %d (%s %s): in process %+v, %v; isolated %+v, %v", i, in.Operation, in.Namespace, want, wantErr, got, gotErr)
		}
		decided += len(want.Denied) + len(want.Warned) + len(want.DryRun) + len(want.Patches)
	}
	if decided == 0 {
		t.Fatal("no policy decided anything: the comparison proves nothing")
	}
	if n := requestsSent(isolated); n < len(inputs) {
		t.Fatalf("%d requests sent to the evaluators for %d inputs: the isolated engine evaluated in process", n, len(inputs))
	}
}

func TestIsolatedEngineOutlivesAPolicyThatEndsItsEvaluator(t *testing.T) {
	cases := map[string]struct {
		rego string
		// stop, if set, stops the evaluator process before the
		// evaluation: a builtin call that never checks for cancellation.
		// The built-ins are then off, so that the Deny policy's evaluation
		// is the one that meets it.
		stop bool
		// memory bounds the process (default 128 MiB).
		memory     int64
		wantReason string
		wantKind   failureKind
		wantExit   string
	}{
		"a unification that overflows the Go stack": {
			rego:       "package crash\n\ndeny contains \"never\" if {\n" + sharedArrays("a", 22) + sharedArrays("b", 22) + "\ta22 = b22\n\tfalse\n}\n",
			memory:     512 << 20, // the stack's bound, 64 MiB, comes first
			wantReason: "ended (exit status 2): fatal error: stack overflow",
			wantKind:   failedCrash,
			wantExit:   "crash",
		},
		"allocations past the memory limit between builtin calls": {
			rego:       "package hog\n\ndeny contains \"never\" if {\n\txs := [y | some i in numbers.range(1, 1000); y := sprintf(\"%4000000d\", [i])]\n\tcount(xs) < 0\n}\n",
			wantReason: "passed policies.evaluator.memoryLimit (128 MiB)",
			wantKind:   failedMemory,
			wantExit:   "memory",
		},
		// Its own evaluation runs far past the limit, so that its process
		// has not answered when the test stops it, however late the stop
		// comes after the request is taken in; stopped, it never answers.
		"an evaluation that does not stop at its time limit": {
			rego:       "package slow\n\ndeny contains \"never\" if {\n\txs := numbers.range(1, 400)\n\tsome a in xs\n\tsome b in xs\n\tsome c in xs\n\ta * b * c < 0\n}\n",
			stop:       true,
			wantReason: "did not stop at its time limit (200ms, or the request's)",
			wantKind:   failedTimeout,
			wantExit:   "timeout",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var disabled []string
			if tc.stop {
				disabled = BuiltinNamesOrDie(t)
			}
			memory := tc.memory
			if memory == 0 {
				memory = 128 << 20
			}
			e := isolatedEngine(t, IsolationOptions{Processes: 1, MemoryLimit: memory}, disabled...)
			reg := prometheus.NewRegistry()
			if err := e.RegisterMetrics(reg); err != nil {
				t.Fatal(err)
			}
			// Memory, not time, must stop the allocations.
			e.SetLimits(Limits{PolicyTimeout: 5 * time.Second, TotalTimeout: 8 * time.Second})
			warnRego := strings.Replace(tc.rego, "package ", "package warn", 1)
			if tc.stop {
				// Run again in a new process, it passes.
				warnRego = strings.Replace(allowAll, "package ", "package warn", 1)
			}
			for _, src := range []Source{{Name: "bad", Rego: tc.rego}, {Name: "bad-warn", Rego: warnRego, Action: Warn}} {
				p, err := Compile(src)
				if err != nil {
					t.Fatal(err)
				}
				e.SetPolicy(p)
			}
			if tc.stop {
				e.SetLimits(Limits{PolicyTimeout: 200 * time.Millisecond})
				var once sync.Once
				testHookLearned = func(pid int) {
					once.Do(func() {
						if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
							t.Error(err)
						}
					})
				}
				defer func() { testHookLearned = nil }()
			}
			obj := admitted(t, "inplace-story1.yaml", nil)
			start := time.Now()
			d, err := e.Evaluate(ctx, Input{Operation: "CREATE", Object: obj})
			took := time.Since(start)
			if err == nil || kindOf(err) != tc.wantKind || !strings.Contains(err.Error(), tc.wantReason) {
				t.Fatalf("error %v (kind %s): want kind %s, saying %q", err, kindOf(err), tc.wantKind, tc.wantReason)
			}
			// The Deny policy that could not decide denies; the Warn one
			// warns; the built-ins of a process that ended before them,
			// or after, still decide.
			if len(d.Denied) != 1 || d.Denied[0].Policy != "bad" || !d.Denied[0].Failed {
				t.Errorf("denied %v: want the Deny policy's failure alone", d.Denied)
			}
			var warned bool
			for _, w := range d.Warned {
				warned = warned || (w.Policy == "bad-warn" && w.Failed)
			}
			// The Warn policy of the stopped process runs in a new one.
			if warned == tc.stop {
				t.Errorf("warned %v: want the Warn policy's failure, unless its process was new", d.Warned)
			}
			if took > 6*time.Second {
				t.Errorf("took %v", took)
			}
			if got := testutil.ToFloat64(e.metrics.evaluatorExits.WithLabelValues(tc.wantExit)); got < 1 {
				t.Errorf("inplace_policy_evaluator_exits_total{reason=%q} = %v", tc.wantExit, got)
			}
			if got := testutil.ToFloat64(e.metrics.failuresTotal.WithLabelValues("bad", string(tc.wantKind))); got != 1 {
				t.Errorf("inplace_policy_evaluation_failures_total{policy=bad,reason=%s} = %v, want 1", tc.wantKind, got)
			}

			// The process that evaluates runs on: without the policies,
			// a JobSet is admitted, and a bad one denied by a built-in.
			e.RemovePolicy("bad")
			e.RemovePolicy("bad-warn")
			d, err = e.Evaluate(ctx, Input{Operation: "CREATE", Object: obj})
			if err != nil || len(d.Denied) != 0 {
				t.Fatalf("after: denied %v, %v", d.Denied, err)
			}
			obj = admitted(t, "inplace-story1.yaml", func(js *jobset.JobSet) {
				zero := int32(0)
				js.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = &zero
			})
			wantDenied := 1
			if tc.stop {
				wantDenied = 0 // no built-in to deny it
			}
			if d, err = e.Evaluate(ctx, Input{Operation: "CREATE", Object: obj}); err != nil || len(d.Denied) != wantDenied {
				t.Fatalf("after, a bad JobSet: denied %v, %v", d.Denied, err)
			}
		})
	}
}

// A policy that runs out of its time limit as OPA cancels it leaves its
// process running: only one that does not stop is ended.
func TestIsolatedEngineKeepsAProcessThatStopsInTime(t *testing.T) {
	e := isolatedEngine(t, IsolationOptions{Processes: 1})
	reg := prometheus.NewRegistry()
	if err := e.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	e.SetLimits(Limits{PolicyTimeout: 50 * time.Millisecond})
	e.SetPolicy(compileOrDie(t, "slow", endless, Deny))
	pool := e.processes.Load()
	before := <-pool.free
	pool.free <- before
	d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: map[string]any{}})
	if kindOf(err) != failedTimeout || len(d.Denied) != 1 {
		t.Fatalf("denied %v, %v: want the policy's timeout", d.Denied, err)
	}
	after := <-pool.free
	pool.free <- after
	if after != before {
		t.Error("the process was ended for a timeout it stopped at")
	}
	if n, err := testutil.GatherAndCount(reg, "inplace_policy_evaluator_exits_total"); err != nil || n != 0 {
		t.Errorf("exits: %d series, %v", n, err)
	}
}

// The evaluator's data.inventory follows the engine's, and a new process
// gets all of it.
func TestIsolatedEngineInventory(t *testing.T) {
	ctx := context.Background()
	e := isolatedEngine(t, IsolationOptions{Processes: 1})
	p, err := e.Compile(Source{Name: "inventory", Rego: inventoryPolicy})
	if err != nil {
		t.Fatal(err)
	}
	e.SetPolicy(p)
	inv := e.Inventory()
	jobSet := map[string]any{"metadata": map[string]any{"name": "train", "namespace": "team-a"}}
	evaluate := func() []string {
		t.Helper()
		d, err := e.Evaluate(ctx, Input{Operation: "CREATE", Object: jobSet, Namespace: "team-a"})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, v := range d.Denied {
			out = append(out, v.Message)
		}
		return out
	}
	expect := func(what string, want ...string) {
		t.Helper()
		if got := evaluate(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: denied %q, want %q", what, got, want)
		}
	}
	claim := func(name string) InventoryObject {
		return InventoryObject{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Namespace: "team-a", Name: name,
			Object: map[string]any{"metadata": map[string]any{"name": name, "annotations": map[string]any{"claims": "train"}}}}
	}
	expect("empty", "namespace not in the inventory")
	for _, o := range []InventoryObject{{APIVersion: "v1", Kind: "Namespace", Name: "team-a", Object: map[string]any{}}, claim("first")} {
		if err := inv.Put(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	expect("namespace and a claim", "name claimed by first")
	if err := inv.Put(ctx, claim("second")); err != nil {
		t.Fatal(err)
	}
	if err := inv.Delete(ctx, "jobset.x-k8s.io/v1alpha2", "JobSet", "team-a", "first"); err != nil {
		t.Fatal(err)
	}
	expect("one claim replaced by another", "name claimed by second")

	// A new process: the whole inventory.
	pool := e.processes.Load()
	proc := <-pool.free
	pool.discard(proc)
	<-proc.exited
	pool.free <- nil
	expect("in a new process", "name claimed by second")
	if err := inv.Delete(ctx, "jobset.x-k8s.io/v1alpha2", "JobSet", "team-a", "second"); err != nil {
		t.Fatal(err)
	}
	if err := inv.Delete(ctx, "v1", "Namespace", "", "team-a"); err != nil {
		t.Fatal(err)
	}
	expect("everything deleted", "namespace not in the inventory")
	if n := requestsSent(e); n < 5 {
		t.Fatalf("%d requests sent to the evaluators", n)
	}
}

// A new process takes in a full inventory within the request's limit,
// and the time it takes is no policy's.
func TestIsolatedEngineLargeInventory(t *testing.T) {
	ctx := context.Background()
	e := isolatedEngine(t, IsolationOptions{Processes: 1})
	// Shorter than taking 20,000 objects in takes, which counts against
	// no policy's limit.
	e.SetLimits(Limits{PolicyTimeout: 50 * time.Millisecond})
	p, err := e.Compile(Source{Name: "inventory", Rego: inventoryPolicy})
	if err != nil {
		t.Fatal(err)
	}
	e.SetPolicy(p)
	inv := e.Inventory()
	// The default policies.inventory.maxObjects, 20,000: 200 namespaces
	// of 100 JobSets each (a write copies the maps along its path: one
	// kind of 20,000 objects would take minutes to fill under -race).
	for i := range 200 {
		ns := fmt.Sprintf("ns-%03d", i)
		if err := inv.Put(ctx, InventoryObject{APIVersion: "v1", Kind: "Namespace", Name: ns, Object: map[string]any{"metadata": map[string]any{"name": ns}}}); err != nil {
			t.Fatal(err)
		}
		for j := range 99 {
			name := fmt.Sprintf("js-%02d", j)
			if err := inv.Put(ctx, InventoryObject{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Namespace: ns, Name: name,
				Object: map[string]any{"metadata": map[string]any{"name": name, "annotations": map[string]any{"claims": "someone-else"}}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := inv.Stats().Objects; n != 20000 {
		t.Fatalf("%d objects", n)
	}
	for _, ns := range []string{"ns-000", "ns-199"} {
		d, err := e.Evaluate(ctx, Input{Operation: "CREATE", Object: map[string]any{"metadata": map[string]any{"name": "train", "namespace": ns}}, Namespace: ns})
		if err != nil || len(d.Denied) != 0 {
			t.Fatalf("%s: denied %v, %v", ns, d.Denied, err)
		}
	}
	if h := e.Health("inventory"); h.Failing {
		t.Errorf("health %+v", h)
	}
}

// A policy replaced or removed is forgotten by the processes, and the
// new version is the one evaluated.
func TestIsolatedEngineForgetsReplacedPolicies(t *testing.T) {
	e := isolatedEngine(t, IsolationOptions{Processes: 1}, BuiltinNamesOrDie(t)...)
	for _, limit := range []int{1, 5, 10} {
		p, err := Compile(Source{Name: "max-restarts", Rego: maxRestartsPolicy, Parameters: map[string]any{"limit": limit}})
		if err != nil {
			t.Fatal(err)
		}
		e.SetPolicy(p)
		d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: admitted(t, "failurepolicy-story2.yaml", nil)}) // maxRestarts 10
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(d.Denied), map[int]int{1: 1, 5: 1, 10: 0}[limit]; got != want {
			t.Errorf("limit %d: denied %v", limit, d.Denied)
		}
	}
	pool := e.processes.Load()
	proc := <-pool.free
	pool.free <- proc
	if len(proc.prepared) != 1 {
		t.Errorf("the process holds %d queries, want the one in force", len(proc.prepared))
	}
	e.RemovePolicy("max-restarts")
	pool.mu.Lock()
	forgotten := len(proc.forgotten)
	pool.mu.Unlock()
	if forgotten != 1 {
		t.Errorf("%d queries to forget after the removal, want 1", forgotten)
	}
}

// A request its caller cancels ends its evaluation, starts no process for
// the rest, and blames no policy.
func TestIsolatedEngineCancelledRequest(t *testing.T) {
	e := isolatedEngine(t, IsolationOptions{Processes: 1}, BuiltinNamesOrDie(t)...)
	e.SetLimits(Limits{PolicyTimeout: 5 * time.Second, TotalTimeout: 8 * time.Second})
	e.SetPolicy(compileOrDie(t, "slow", endless, Deny))
	for _, name := range []string{"then-a", "then-b", "then-c"} {
		e.SetPolicy(compileOrDie(t, name, strings.Replace(allowAll, "quiet", strings.ReplaceAll(name, "-", ""), 1), Deny))
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := e.Evaluate(ctx, Input{Operation: "CREATE", Object: map[string]any{}})
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a request cancelled at 100ms returned after %v", took)
	}
	if kindOf(err) != failedUnavailable || !errors.Is(err, context.Canceled) {
		t.Errorf("error %v (kind %s): want the caller's cancellation", err, kindOf(err))
	}
	if h := e.Health("slow"); h.Failing {
		t.Errorf("health %+v", h)
	}
	if n := requestsSent(e); n != 1 {
		t.Errorf("%d requests sent: want the cancelled one alone, no process started for the rest", n)
	}
	// The next request has a process.
	e.RemovePolicy("slow")
	e.SetPolicy(compileOrDie(t, "quiet", allowAll, Deny))
	if d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: map[string]any{}}); err != nil || len(d.Denied) != 0 {
		t.Errorf("after: %v, %v", d.Denied, err)
	}
}

// A request that finds every process busy past its limit says what to
// raise, and blames no policy.
func TestIsolatedEngineNoFreeProcess(t *testing.T) {
	e := isolatedEngine(t, IsolationOptions{Processes: 1}, BuiltinNamesOrDie(t)...)
	e.SetLimits(Limits{PolicyTimeout: 50 * time.Millisecond, TotalTimeout: 100 * time.Millisecond})
	e.SetPolicy(compileOrDie(t, "quiet", allowAll, Deny))
	pool := e.processes.Load()
	busy := <-pool.free
	defer func() { pool.free <- busy }()
	d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: map[string]any{}})
	if kindOf(err) != failedUnavailable || !strings.Contains(err.Error(), "raise policies.evaluator.processes") || len(d.Denied) != 1 {
		t.Errorf("denied %v, error %v: want the policy failed as unavailable", d.Denied, err)
	}
}

// Close ends the processes; evaluations after it fail, and start none.
func TestIsolatedEngineClose(t *testing.T) {
	e := isolatedEngine(t, IsolationOptions{Processes: 1}, BuiltinNamesOrDie(t)...)
	e.SetPolicy(compileOrDie(t, "quiet", allowAll, Deny))
	pool := e.processes.Load()
	proc := <-pool.free
	pool.free <- proc
	e.Close()
	<-proc.exited
	d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: map[string]any{}})
	if kindOf(err) != failedUnavailable || len(d.Denied) != 1 {
		t.Errorf("after Close: denied %v, %v", d.Denied, err)
	}
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if len(pool.live) != 0 {
		t.Errorf("%d processes live after Close", len(pool.live))
	}
}

// Requests evaluated at once share the processes, each its own inputs.
func TestIsolatedEngineConcurrentRequests(t *testing.T) {
	e := isolatedEngine(t, IsolationOptions{Processes: 2})
	e.SetPolicy(compileOrDie(t, "names", `package names

deny contains sprintf("%s is odd", [input.object.metadata.name]) if {
	endswith(input.object.metadata.name, "1")
}
`, Deny))
	var wg sync.WaitGroup
	errs := make(chan error, 8*20)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				name := fmt.Sprintf("js-%d-%d", g, i%2)
				d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: map[string]any{"metadata": map[string]any{"name": name}}})
				if err != nil {
					errs <- err
					continue
				}
				want := 0
				if i%2 == 1 {
					want = 1
				}
				if len(d.Denied) != want || (want == 1 && d.Denied[0].Message != name+" is odd") {
					errs <- fmt.Errorf("%s: denied %v", name, d.Denied)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// An evaluator refuses bad arguments, and greets.
func TestEvaluatorGreeting(t *testing.T) {
	var out strings.Builder
	if err := serveEvaluator([]string{"-memory-limit", "x"}, strings.NewReader(""), &out); err == nil || !strings.Contains(err.Error(), `-memory-limit: "x" is not a positive number of bytes`) {
		t.Errorf("bad argument: %v", err)
	}
	out.Reset()
	if err := serveEvaluator(nil, strings.NewReader(""), &out); err != nil || !strings.Contains(out.String(), evaluatorGreeting) {
		t.Errorf("greeting %q, %v", out.String(), err)
	}
}

// An evaluator is sent the inventory for the policies that may read it.
func TestReadsInventory(t *testing.T) {
	for src, want := range map[string]bool{
		maxRestartsPolicy: false,
		inventoryPolicy:   true,
		"package p\n\ndeny contains \"x\" if { data[input.x].y }\n":                                true,
		"package p\nimport data.inventory.cluster as c\n\ndeny contains k if { some k, _ in c }\n": true,
		"package p\n\nhelper := 1\n\ndeny contains \"x\" if { data.p.helper == 2 }\n":              false,
	} {
		p, err := Compile(Source{Name: "p", Rego: src})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.query.source.Inventory; got != want {
			t.Errorf("reads the inventory: %v, want %v:\n%s", got, want, src)
		}
	}
}
