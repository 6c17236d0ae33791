// Package restartbench measures JobSet restarts on the local cluster: a
// real control plane, inplace-manager as installed (its RBAC, webhooks and
// the agents' admission policy) and simulated nodes running the real agent
// in every Pod, one worker Pod per node. It times an in-place restart
// against Recreate and BlockingRecreate after a worker exit or a Pod
// deletion, measures the machine's floor for the API work an in-place
// restart needs, and counts the requests each actor sends.
//
// `make bench-restart` runs it (test/bench/restart); a small configuration
// runs in `make test` as a smoke test.
package restartbench

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/manager"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/simnode"
)

// Actors whose requests are counted apart.
const (
	ActorController = "controller"
	ActorAgents     = "agents"
	ActorKubelets   = "kubelets"
)

// env is one local cluster with the manager and N simulated nodes.
type env struct {
	nodes    int
	cluster  *cluster.Cluster
	admin    *rest.Config
	client   client.WithWatch
	cs       kubernetes.Interface
	sim      *simnode.Sim
	recorder *simnode.Recorder
	counters map[string]*requestCounter
	cpu      *cpuAccount
	// profileDir receives a CPU profile of this process per restart, if
	// set.
	profileDir string
	// apiserverProfile is how long to profile the API server from each
	// failure, into profileDir.
	apiserverProfile time.Duration
	log              logr.Logger
	// restarts counts the failures injected, to choose their victims.
	restarts int
}

func startEnv(ctx context.Context, nodes int, restartTimeout time.Duration, log logr.Logger) (*env, func(), error) {
	c, err := cluster.Start(ctx, cluster.Options{
		Name: fmt.Sprintf("bench-restart-%d", nodes),
		// Sized for thousands of writers at once, as a large cluster's
		// apiserver is: with the local default (1,000), the agents' epoch
		// patches and the kubelets' status patches of N >= 1,000 Pods are
		// refused with 429 and retried, which costs more than queueing them.
		APIServerFlags: map[string]string{"max-mutating-requests-inflight": strconv.Itoa(max(1000, 3*nodes))},
	})
	if err != nil {
		return nil, nil, err
	}
	e := &env{nodes: nodes, cluster: c, admin: c.Config, recorder: &simnode.Recorder{}, log: log, cpu: newCPUAccount(c.PIDs()),
		counters: map[string]*requestCounter{ActorController: newRequestCounter(), ActorAgents: newRequestCounter(), ActorKubelets: newRequestCounter()}}
	runCtx, cancel := context.WithCancel(ctx)
	stop := func() {
		cancel()
		if e.sim != nil {
			e.sim.Wait()
		}
		_ = c.Stop(false)
	}
	fail := func(err error) (*env, func(), error) {
		stop()
		return nil, nil, err
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return fail(err)
	}
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{Paths: []string{root + "/config/crd/bases"}, ErrorIfPathMissing: true}); err != nil {
		return fail(err)
	}
	if e.client, err = client.NewWithWatch(c.Config, client.Options{Scheme: manager.NewScheme()}); err != nil {
		return fail(err)
	}
	e.cs = kubernetes.NewForConfigOrDie(c.Config)
	// Profile labels tell the actors apart in a CPU profile of this process
	// (-cpuprofile): goroutines inherit them from the one that starts them.
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("actor", ActorController)))
	// The manager as installed, except that an in-place restart may take
	// as long as the benchmark waits for one: its fallback to Recreate
	// (after 5 minutes by default) would end the measurement, not speed it.
	_, err = deploy.RunManager(runCtx, c.Config, func(conf *configv1alpha1.Configuration) {
		conf.Controller.InPlaceRestartTimeout = &metav1.Duration{Duration: restartTimeout}
	}, e.counters[ActorController].wrap)
	pprof.SetGoroutineLabels(ctx)
	if err != nil {
		return fail(fmt.Errorf("starting inplace-manager: %w", err))
	}
	kubeletCfg := kubeletConfig(c.Config)
	e.counters[ActorKubelets].wrap(kubeletCfg)
	agentCfg := rest.CopyConfig(c.Config)
	e.counters[ActorAgents].wrap(agentCfg)
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("actor", ActorKubelets)))
	e.sim, err = simnode.Start(runCtx, simnode.Options{
		Client: kubernetes.NewForConfigOrDie(kubeletCfg), Nodes: nodes, Prefix: "sim",
		AgentContainer: "inplace-agent", AgentConfig: agentCfg, Recorder: e.recorder,
		Log: log.WithName("simnode"),
	})
	pprof.SetGoroutineLabels(ctx)
	if err != nil {
		return fail(err)
	}
	return e, stop, nil
}

// kubeletConfig is the simulated kubelets' client: protobuf, as a
// kubelet's, and no client-side rate limit, since the kubelets of N nodes
// share it.
func kubeletConfig(admin *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(admin)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

// watchEventsSent reads the API server's count of watch events sent.
func (e *env) watchEventsSent(ctx context.Context) (float64, error) {
	raw, err := e.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return 0, err
	}
	total := 0.0
	if f, ok := families["apiserver_watch_events_total"]; ok {
		for _, m := range f.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	return total, nil
}

func (e *env) snapshot() map[string]map[string]int {
	out := map[string]map[string]int{}
	for actor, c := range e.counters {
		out[actor] = c.snapshot()
	}
	return out
}

func since(t0 time.Time, t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return t.Sub(t0)
}
