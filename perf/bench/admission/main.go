package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/perf/bench/stats"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/review"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/webhook"
)

func main() {
	iterations := flag.Int("iterations", 3000, "handler calls per manifest")
	auditJobSets := flag.Int("audit-jobsets", 10000, "JobSets in the audit part; 0 skips it")
	var load loadOptions
	var err error
	clients := flag.String("load-clients", "50,200,500", "admission under load: concurrent clients")
	policies := flag.String("load-policies", "0,16,100", "admission under load: admin policies installed")
	replicas := flag.String("load-replicas", "1,3", "admission under load: webhook replicas")
	modes := flag.String("load-modes", modeDryRun+","+modeCreate, "admission under load: "+modeDryRun+" (server-side dry-run), "+modeCreate+" (stored); empty skips the part")
	flag.IntVar(&load.requests, "load-requests", 1000, "admission under load: creates per measurement (at least 4 per client)")
	out := flag.String("out", ".local/bench/admission.json", "JSON results")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (the webhooks, the clients) to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "admission benchmark: -cpuprofile:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	for _, f := range []struct {
		name, value string
		into        *[]int
	}{{"load-clients", *clients, &load.clients}, {"load-policies", *policies, &load.policies}, {"load-replicas", *replicas, &load.replicas}} {
		if *f.into, err = ints(f.value); err != nil {
			fmt.Fprintf(os.Stderr, "admission benchmark: -%s: %v\n", f.name, err)
			os.Exit(2)
		}
	}
	if *modes != "" {
		load.modes = strings.Split(*modes, ",")
	}
	for _, m := range load.modes {
		if m != modeDryRun && m != modeCreate {
			fmt.Fprintf(os.Stderr, "admission benchmark: -load-modes: %q: use %s or %s\n", m, modeDryRun, modeCreate)
			os.Exit(2)
		}
	}
	if err := run(*iterations, load, *auditJobSets, *out); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "admission benchmark:", err)
		os.Exit(1)
	}
}

type result struct {
	Machine  string          `json:"machine"`
	Handlers []stats.Summary `json:"handlers"`
	Policies []stats.Summary `json:"policies"`
	Audit    []auditResult   `json:"audit,omitempty"`
	Load     []loadCell      `json:"load,omitempty"`
}

// ints parses a comma-separated list of non-negative integers.
func ints(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a list of whole numbers", list)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(iterations int, lo loadOptions, auditJobSets int, out string) error {
	ctx := context.Background()
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	res := result{Machine: fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())}

	cfg := &configv1alpha1.Configuration{}
	configv1alpha1.SetDefaults(cfg)
	engine, err := policies.NewEngine(nil)
	if err != nil {
		return err
	}
	m := webhook.NewMutator(webhook.Options{Agent: cfg.Agent, Engine: engine})
	v := webhook.NewValidator(webhook.Options{Agent: cfg.Agent, Engine: engine})

	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	for _, file := range []string{"inplace-story1.yaml", "inplace-story2.yaml", "failurepolicy-story4.yaml"} {
		raw, mutated, err := load(ctx, root, file, m)
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := json.Unmarshal(mutated, &obj); err != nil {
			return err
		}
		var mut, val, pol, both []time.Duration
		for i := 0; i < iterations+iterations/10; i++ {
			t0 := time.Now()
			m.Handle(ctx, request(raw))
			t1 := time.Now()
			v.Handle(ctx, request(mutated))
			t2 := time.Now()
			if _, err := engine.Evaluate(ctx, review.Offline("CREATE", "", obj, nil, nil)); err != nil {
				return err
			}
			t3 := time.Now()
			if i < iterations/10 {
				continue // warm-up
			}
			mut, val, pol, both = append(mut, t1.Sub(t0)), append(val, t2.Sub(t1)), append(pol, t3.Sub(t2)), append(both, t2.Sub(t0))
		}
		res.Handlers = append(res.Handlers,
			stats.Summarize("mutate "+file, mut),
			stats.Summarize("validate "+file, val),
			stats.Summarize("mutate+validate "+file, both),
			stats.Summarize("policy evaluation "+file, pol))
	}

	js2, err := readSpec(root, "inplace-story2.yaml")
	if err != nil {
		return err
	}
	m2, err := webhook.Pipeline{Agent: cfg.Agent}.Mutate(ctx, js2, review.Offline("CREATE", js2.Namespace, nil, nil, nil))
	if err != nil {
		return err
	}
	mutated2 := m2.JSON
	var obj2 map[string]any
	if err := json.Unmarshal(mutated2, &obj2); err != nil {
		return err
	}
	if res.Policies, err = policyScaling(ctx, obj2, iterations); err != nil {
		return err
	}
	if auditJobSets > 0 {
		if res.Audit, err = audit(ctx, root, auditJobSets); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}

	if len(lo.modes) > 0 {
		if res.Load, err = admissionLoad(ctx, root, lo); err != nil {
			return fmt.Errorf("admission under load: %w", err)
		}
	}

	fmt.Printf("admission benchmark on %s\n\n", res.Machine)
	stats.Table(os.Stdout, res.Handlers)
	fmt.Println()
	fmt.Println("admin policies (every built-in too), on Story 2:")
	stats.Table(os.Stdout, res.Policies)
	fmt.Println()
	if len(res.Audit) > 0 {
		fmt.Println("one audit:")
		fmt.Print(auditTable(res.Audit))
		fmt.Println()
	}
	if len(res.Load) > 0 {
		loadTable(os.Stdout, res.Load)
		fmt.Println()
	}
	if err := stats.WriteJSON(out, res); err != nil {
		return err
	}
	fmt.Println("results written to", out)
	return nil
}

func request(raw []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "bench", Name: "js", Namespace: "default", Operation: admissionv1.Create,
		Object: k8sruntime.RawExtension{Raw: raw},
	}}
}

// load reads a spec manifest and returns it as JSON, before and after the
// mutating webhook.
func load(ctx context.Context, root, file string, m *webhook.Mutator) (raw, mutated []byte, err error) {
	js, err := readSpec(root, file)
	if err != nil {
		return nil, nil, err
	}
	if raw, err = json.Marshal(js); err != nil {
		return nil, nil, err
	}
	cfg := &configv1alpha1.Configuration{}
	configv1alpha1.SetDefaults(cfg)
	stored, err := webhook.Pipeline{Agent: cfg.Agent}.Mutate(ctx, js.DeepCopy(), review.Offline("CREATE", js.Namespace, nil, nil, nil))
	return raw, stored.JSON, err
}
