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
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	rbacv1 "k8s.io/api/rbac/v1"
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
		// The API server as in production: API Priority and Fairness on,
		// with its default limits, so that thousands of writers at once
		// are queued by priority instead of all admitted — admitted, the
		// 15,000 writes of N = 5,000 in flight at once took longer than
		// the request timeout, and their retries kept it overloaded.
		APIServerFlags: map[string]string{
			"enable-priority-and-fairness":   "true",
			"max-requests-inflight":          "400",
			"max-mutating-requests-inflight": "200",
		},
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
	if err := authorizeKubelets(ctx, e.cs); err != nil {
		return fail(err)
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

// kubeletUser is who the simulated kubelets are to the API server: a node,
// so that API Priority and Fairness gives their requests the nodes'
// priority level, and never the unlimited one of the cluster's admin.
var kubeletUser = rest.ImpersonationConfig{UserName: "system:node:simulated", Groups: []string{"system:nodes", "system:authenticated"}}

// kubeletConfig is the simulated kubelets' client: a node's identity,
// protobuf, as a kubelet's, and no client-side rate limit, since the
// kubelets of N nodes share it.
func kubeletConfig(admin *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = kubeletUser
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

// authorizeKubelets lets the simulated kubelets do what they do (the local
// cluster has no node authorizer; RBAC alone grants them).
func authorizeKubelets(ctx context.Context, cs kubernetes.Interface) error {
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "simulated-kubelets"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: kubeletUser.UserName}},
	}
	_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	return err
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
