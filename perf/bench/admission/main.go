package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	managerapp "github.com/inplace-dev/inplace/cmd/manager/app"
	"github.com/inplace-dev/inplace/perf/bench/stats"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/webhook"
)

func main() {
	iterations := flag.Int("iterations", 3000, "handler calls per manifest")
	requests := flag.Int("requests", 2000, "JobSet creations through the apiserver")
	concurrency := flag.Int("concurrency", 50, "concurrent clients for the apiserver part")
	auditJobSets := flag.Int("audit-jobsets", 10000, "JobSets in the audit part; 0 skips it")
	out := flag.String("out", ".local/bench/admission.json", "JSON results")
	flag.Parse()
	if err := run(*iterations, *requests, *concurrency, *auditJobSets, *out); err != nil {
		fmt.Fprintln(os.Stderr, "admission benchmark:", err)
		os.Exit(1)
	}
}

type result struct {
	Machine    string          `json:"machine"`
	Handlers   []stats.Summary `json:"handlers"`
	Policies   []stats.Summary `json:"policies"`
	Audit      []auditResult   `json:"audit,omitempty"`
	APIServer  stats.Summary   `json:"apiserver"`
	Throughput float64         `json:"throughputPerSecond"`
}

func run(iterations, requests, concurrency, auditJobSets int, out string) error {
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
			if _, err := engine.Evaluate(ctx, policies.Input{Operation: "CREATE", Object: obj}); err != nil {
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

	story2, err := os.ReadFile(filepath.Join(root, "test", "testdata", "specs", "inplace-story2.yaml"))
	if err != nil {
		return err
	}
	var js2 jobset.JobSet
	if err := yaml.UnmarshalStrict(story2, &js2); err != nil {
		return err
	}
	mutated2, _, err := webhook.Mutate(ctx, &js2, cfg.Agent, nil, policies.Input{})
	if err != nil {
		return err
	}
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

	api, throughput, err := throughApiserver(ctx, root, requests, concurrency)
	if err != nil {
		return err
	}
	res.APIServer, res.Throughput = api, throughput
	res.APIServer.Extra = fmt.Sprintf("%.0f creates/s with %d clients", throughput, concurrency)

	fmt.Printf("admission benchmark on %s\n\n", res.Machine)
	stats.Table(os.Stdout, append(res.Handlers, res.APIServer))
	fmt.Println()
	fmt.Println("admin policies (every built-in too), on Story 2:")
	stats.Table(os.Stdout, res.Policies)
	fmt.Println()
	if len(res.Audit) > 0 {
		fmt.Println("one audit:")
		fmt.Print(auditTable(res.Audit))
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
	data, err := os.ReadFile(filepath.Join(root, "test", "testdata", "specs", file))
	if err != nil {
		return nil, nil, err
	}
	var js jobset.JobSet
	if err := yaml.UnmarshalStrict(data, &js); err != nil {
		return nil, nil, err
	}
	if raw, err = json.Marshal(&js); err != nil {
		return nil, nil, err
	}
	cfg := &configv1alpha1.Configuration{}
	configv1alpha1.SetDefaults(cfg)
	mutated, _, err = webhook.Mutate(ctx, js.DeepCopy(), cfg.Agent, nil, policies.Input{})
	return raw, mutated, err
}

// throughApiserver starts an apiserver and the manager's webhooks, then
// creates JobSets with server-side dry-run from concurrent clients.
func throughApiserver(ctx context.Context, root string, requests, concurrency int) (stats.Summary, float64, error) {
	bin, err := cluster.BinDir()
	if err != nil {
		return stats.Summary{}, 0, err
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd", "bases")}, BinaryAssetsDirectory: bin}
	restCfg, err := env.Start()
	if err != nil {
		return stats.Summary{}, 0, fmt.Errorf("starting the apiserver: %w", err)
	}
	defer func() { _ = env.Stop() }()
	restCfg.QPS, restCfg.Burst = 5000, 5000

	conf := &configv1alpha1.Configuration{}
	configv1alpha1.SetDefaults(conf)
	conf.LeaderElection.LeaderElect = ptr.To(false)
	conf.Metrics.BindAddress, conf.Health.ProbeBindAddress = "0", "0"
	conf.Webhook.SelfSignedCerts, conf.Webhook.Hosts = true, []string{"127.0.0.1"}
	if conf.Webhook.CertDir, err = os.MkdirTemp("", "inplace-bench-"); err != nil {
		return stats.Summary{}, 0, err
	}
	defer os.RemoveAll(conf.Webhook.CertDir)
	conf.Webhook.Port = 19443
	mgr, err := ctrl.NewManager(restCfg, managerapp.Options(conf, managerapp.NewScheme()))
	if err != nil {
		return stats.Summary{}, 0, err
	}
	if err := managerapp.Setup(mgr, conf, prometheus.NewRegistry()); err != nil {
		return stats.Summary{}, 0, err
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = mgr.Start(mctx) }()

	c, err := client.New(restCfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		return stats.Summary{}, 0, err
	}
	if err := deploy.RegisterWebhooks(ctx, c, conf.Webhook.Port); err != nil {
		return stats.Summary{}, 0, err
	}
	data, err := os.ReadFile(filepath.Join(root, "test", "testdata", "specs", "inplace-story1.yaml"))
	if err != nil {
		return stats.Summary{}, 0, err
	}
	var template jobset.JobSet
	if err := yaml.UnmarshalStrict(data, &template); err != nil {
		return stats.Summary{}, 0, err
	}
	template.Namespace = "default"
	create := func() error {
		js := template.DeepCopy()
		return c.Create(ctx, js, client.DryRunAll)
	}
	// Wait for the webhooks (certificate and caBundle) to be in place.
	var lastErr error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		lastErr = create()
		return lastErr == nil, nil
	}); err != nil {
		return stats.Summary{}, 0, fmt.Errorf("webhooks not reachable: %w (last: %w)", err, lastErr)
	}

	var (
		mu      sync.Mutex
		samples []time.Duration
		wg      sync.WaitGroup
		next    = make(chan struct{}, requests)
		errs    []error
	)
	for range requests {
		next <- struct{}{}
	}
	close(next)
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for range next {
				t0 := time.Now()
				err := create()
				d := time.Since(t0)
				mu.Lock()
				samples = append(samples, d)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(errs) > 0 {
		return stats.Summary{}, 0, fmt.Errorf("%d of %d creates failed, first: %w", len(errs), requests, errs[0])
	}
	return stats.Summarize("create via apiserver (dry-run, Story 1)", samples), float64(requests) / elapsed.Seconds(), nil
}
