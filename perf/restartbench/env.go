package restartbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	managerapp "github.com/inplace-dev/inplace/cmd/manager/app"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/simnode"
	"github.com/inplace-dev/inplace/test/upstreamjobset"
)

// Actors whose requests are counted apart.
const (
	ActorController = "controller"
	ActorAgents     = "agents"
	ActorKubelets   = "kubelets"
)

// env is one local cluster with the manager and N simulated nodes.
type env struct {
	nodes int
	// firstStarts are the first starts measured (real nodes), every
	// round's.
	firstStarts []FirstStart
	// round is the round of the strategies now measured, from 0
	// (FirstStart.Round).
	round    int
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

	// real: the Pods run on real nodes, whose moments a podObserver
	// records; the API server writes its audit log to auditLog, and
	// kubectl makes their workers exit.
	real     bool
	auditLog string
	kubectl  string

	// stopManager stops inplace-manager, which runs in this process, and
	// returns once it has stopped, or an error if it has not within a
	// minute.
	stopManager func() error
	// upstream: upstream JobSet's controller runs the cluster's JobSets
	// in place of inplace-manager (switchToUpstream).
	upstream bool
}

// managerFlowControl is the manager's FlowSchema and priority level, as
// installed.
const managerFlowControl = "config/manager/flowcontrol.yaml"

// Names the benchmark's objects have.
const (
	benchNamespacePrefix = "bench-"
	// simNodePrefix: the simulated nodes are sim-0 … sim-<N-1>.
	simNodePrefix  = "sim"
	agentContainer = "inplace-agent"
)

func startEnv(ctx context.Context, cfg Config, nodes int, controlPlane cluster.Options) (*env, func(), error) {
	realNodes, restartTimeout, log := cfg.RealNodes, cfg.Timeout, cfg.Log
	// The API server as in production: API Priority and Fairness on, with
	// its default limits, so that thousands of writers at once are queued
	// by priority instead of all admitted — admitted, the 15,000 writes of
	// N = 5,000 in flight at once took longer than the request timeout, and
	// their retries kept it overloaded.
	flags := map[string]string{
		"enable-priority-and-fairness":   "true",
		"max-requests-inflight":          "400",
		"max-mutating-requests-inflight": "200",
	}
	var auditDir string
	if realNodes > 0 {
		var err error
		if auditDir, err = os.MkdirTemp("", "inplace-bench-audit-"); err != nil {
			return nil, nil, err
		}
		audit, err := auditFlags(auditDir)
		if err != nil {
			os.RemoveAll(auditDir)
			return nil, nil, err
		}
		maps.Copy(flags, audit)
	}
	opts := controlPlane
	opts.Name, opts.RealNodes, opts.APIServerFlags = fmt.Sprintf("bench-restart-%d", nodes), realNodes, flags
	// Upstream's controller and agent reach the real nodes from the
	// cluster's registry, under the names its manifests pull.
	opts.Registry = anyUpstream(cfg.Strategies)
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		os.RemoveAll(auditDir)
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
		if auditDir != "" {
			os.RemoveAll(auditDir)
		}
	}
	fail := func(err error) (*env, func(), error) {
		stop()
		return nil, nil, err
	}
	if err := deploy.InstallCRDs(c.Config); err != nil {
		return fail(err)
	}
	if e.client, err = client.NewWithWatch(c.Config, client.Options{Scheme: managerapp.NewScheme()}); err != nil {
		return fail(err)
	}
	e.cs = kubernetes.NewForConfigOrDie(c.Config)
	// Profile labels tell the actors apart in a CPU profile of this process
	// (-cpuprofile): goroutines inherit them from the one that starts them.
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("actor", ActorController)))
	// The manager as installed, except that an in-place restart may take
	// as long as the benchmark waits for one: its fallback to Recreate
	// (after 5 minutes by default) would end the measurement, not speed it.
	//
	// Beside simulated nodes the leader takes its agents' reports over
	// their in-memory Pod network: 10,000 agents' connections and the
	// leader's ends of them would not fit under this machine's open-file
	// limit on TCP.
	var setup []managerapp.SetupOption
	podNet := simnode.NewNetwork()
	if realNodes == 0 {
		setup = append(setup, managerapp.ReportListener(podNet.Listen))
	}
	managerCtx, cancelManager := context.WithCancel(runCtx)
	var managers int
	managerDone, err := deploy.RunManager(managerCtx, c.Config, func(conf *configv1alpha1.Configuration) {
		conf.Controller.InPlaceRestartTimeout = &metav1.Duration{Duration: restartTimeout}
		if realNodes > 0 {
			conf.Agent.Image = images.Agent
			conf.Agent.SupervisorVolume = cfg.SupervisorVolume
		}
		managers = len(deploy.Roles(conf))
	}, e.counters[ActorController].wrap, setup...)
	pprof.SetGoroutineLabels(ctx)
	if err != nil {
		cancelManager()
		return fail(fmt.Errorf("starting inplace-manager: %w", err))
	}
	e.stopManager = func() error {
		cancelManager()
		// Each of its managers (the controller, the admission server)
		// sends its result.
		for i := range managers {
			select {
			case err := <-managerDone:
				if err != nil {
					log.Error(err, "inplace-manager stopped")
				}
			case <-time.After(time.Minute):
				return fmt.Errorf("%d of inplace-manager's %d managers still ran a minute after they were told to stop", managers-i, managers)
			}
		}
		return nil
	}
	if !cfg.NoManagerFlowSchema {
		if err := deploy.Apply(ctx, e.client, managerFlowControl); err != nil {
			return fail(fmt.Errorf("installing the manager's priority level: %w", err))
		}
	}
	if realNodes > 0 {
		e.real, e.auditLog = true, filepath.Join(auditDir, "audit.log")
		bin, err := cluster.BinDir()
		if err != nil {
			return fail(err)
		}
		e.kubectl = filepath.Join(bin, "kubectl")
		if err := observePods(runCtx, e.cs, e.recorder); err != nil {
			return fail(err)
		}
		if opts.Registry {
			root, err := cluster.RepoRoot()
			if err != nil {
				return fail(err)
			}
			if _, _, err := upstreamjobset.PushImages(ctx, root, bin, c.Registry, io.Discard); err != nil {
				return fail(err)
			}
		}
		return e, stop, nil
	}
	if err := authorizeKubelets(ctx, e.cs); err != nil {
		return fail(err)
	}
	kubeletCfg := rest.CopyConfig(c.Config)
	e.counters[ActorKubelets].wrap(kubeletCfg)
	kubelets := newKubeletClients(kubeletCfg)
	agentCfg := rest.CopyConfig(c.Config)
	e.counters[ActorAgents].wrap(agentCfg)
	agentCfg.Dial = e.counters[ActorAgents].dial
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("actor", ActorKubelets)))
	e.sim, err = simnode.Start(runCtx, simnode.Options{
		// The Pods' watch, shared by the simulated nodes.
		Client: kubernetes.NewForConfigOrDie(kubelets.config("sim")), NodeClient: kubelets.node, Nodes: nodes, Prefix: simNodePrefix,
		AgentContainer: "inplace-agent", AgentConfig: agentCfg, Recorder: e.recorder,
		Network: podNet, Log: log.WithName("simnode"),
	})
	pprof.SetGoroutineLabels(ctx)
	if err != nil {
		return fail(err)
	}
	return e, stop, nil
}

// The simulated kubelets are nodes to the API server, each its own:
// system:node:<name> in the group system:nodes, as a real kubelet. API
// Priority and Fairness then gives their requests the nodes' priority
// level, never the unlimited one of the cluster's admin, and queues each
// node's requests as a flow of its own. When all of them were one user
// they were one flow, whose few queues overflowed with a thousand status
// writes at once: the API server sent them back to wait a second and try
// again (5,073 refusals in three restarts at N = 1,000) while the cores
// idled.
const nodesGroup = "system:nodes"

func nodeUser(node string) rest.ImpersonationConfig {
	return rest.ImpersonationConfig{UserName: "system:node:" + node, Groups: []string{nodesGroup, "system:authenticated"}}
}

// kubeletClients makes the simulated kubelets' clients, one per node with
// that node's identity. They share one connection (client-go shares a
// transport between configs of the same TLS settings; the identity is a
// header): opening one per node is not what is measured.
type kubeletClients struct {
	base   *rest.Config
	mu     sync.Mutex
	byNode map[string]corev1client.CoreV1Interface
}

// newKubeletClients talks protobuf, as a kubelet does, with no
// client-side rate limit, since the kubelets of N nodes share the process.
func newKubeletClients(admin *rest.Config) *kubeletClients {
	cfg := rest.CopyConfig(admin)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return &kubeletClients{base: cfg, byNode: map[string]corev1client.CoreV1Interface{}}
}

// node returns the client of one node's kubelet.
func (k *kubeletClients) node(name string) corev1client.CoreV1Interface {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c, ok := k.byNode[name]; ok {
		return c
	}
	c := corev1client.NewForConfigOrDie(k.config(name))
	k.byNode[name] = c
	return c
}

// config is the client configuration of one node's kubelet.
func (k *kubeletClients) config(name string) *rest.Config {
	cfg := rest.CopyConfig(k.base)
	cfg.Impersonate = nodeUser(name)
	return cfg
}

// authorizeKubelets lets the simulated kubelets do what they do (the local
// cluster has no node authorizer; RBAC alone grants them), and returns
// once the API server's authorizer holds the grant: it reads bindings from
// its own cache, so a node registered right after the binding was created
// was once refused ("nodes is forbidden") at N = 5,000.
func authorizeKubelets(ctx context.Context, cs kubernetes.Interface) error {
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "simulated-kubelets"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: nodesGroup}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return err
	}
	probe := nodeUser("probe")
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: probe.UserName, Groups: probe.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "nodes"},
	}}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed, nil
	})
	if err != nil {
		return fmt.Errorf("the API server did not authorize the simulated kubelets within a minute of binding %s: %w", binding.Name, err)
	}
	return nil
}

// apiServerCounts is what the API server counted of a restart's load.
type apiServerCounts struct {
	// WatchEvents sent to watchers.
	WatchEvents float64
	// Rejected requests by API Priority and Fairness, by priority level:
	// its queues were full or the request waited in one too long. The
	// client waits as the response's Retry-After says and tries again.
	Rejected map[string]float64
}

// apiServerCounters reads the API server's counters of watch events sent
// and of requests it rejected.
func (e *env) apiServerCounters(ctx context.Context) (apiServerCounts, error) {
	counts := apiServerCounts{Rejected: map[string]float64{}}
	raw, err := e.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return counts, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return counts, err
	}
	if f, ok := families["apiserver_watch_events_total"]; ok {
		for _, m := range f.GetMetric() {
			counts.WatchEvents += m.GetCounter().GetValue()
		}
	}
	if f, ok := families["apiserver_flowcontrol_rejected_requests_total"]; ok {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "priority_level" {
					counts.Rejected[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return counts, nil
}

// since returns the watch events sent and the requests rejected, by
// priority level, between before and c.
func (c apiServerCounts) since(before apiServerCounts) (float64, map[string]float64) {
	var rejected map[string]float64
	for level, n := range c.Rejected {
		if d := n - before.Rejected[level]; d > 0 {
			if rejected == nil {
				rejected = map[string]float64{}
			}
			rejected[level] = d
		}
	}
	return c.WatchEvents - before.WatchEvents, rejected
}

// handshakes returns the connections each actor opened so far.
func (e *env) handshakes() map[string]int {
	out := map[string]int{}
	for actor, c := range e.counters {
		out[actor] = int(c.dials.Load())
	}
	return out
}

// forgetRequests starts a restart's account of the requests sent.
func (e *env) forgetRequests() {
	for _, c := range e.counters {
		c.forget()
	}
}

// requestsBetween counts each actor's requests sent from from to to.
func (e *env) requestsBetween(from, to time.Time) map[string]map[string]int {
	out := map[string]map[string]int{}
	for actor, c := range e.counters {
		out[actor] = c.between(from, to)
	}
	return out
}

func since(t0 time.Time, t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return t.Sub(t0)
}
