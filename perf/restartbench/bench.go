package restartbench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/simnode"
	"github.com/inplace-dev/inplace/test/upstreamjobset"
)

// Node latency profiles.
const (
	ProfileZero      = "zero"
	ProfileRealistic = "realistic"
)

// Profiles maps a profile's name to its node latency.
var Profiles = map[string]simnode.Latency{
	ProfileZero:      {},
	ProfileRealistic: simnode.RealisticLatency,
}

// Control-plane profiles: the client rate limits of kube-controller-manager
// (whose Job controller creates a Recreate's new Pods and whose garbage
// collector deletes the old ones) and of kube-scheduler (which binds every
// new Pod), and the Job controller's workers. An in-place restart does not
// wait on either (the Job controller only updates its Jobs' ready counts);
// a Recreate waits on both.
const (
	// ControlPlaneDefaults: the components' own defaults, what a cluster
	// that does not tune them runs: controller manager 20 requests per
	// second (bursts of 30), scheduler 50 (100), 5 Job syncs at once.
	ControlPlaneDefaults = "defaults"
	// ControlPlaneScale: as the Kubernetes project's own 5,000-node
	// scalability tests run them (kubernetes/test-infra, sig-scalability's
	// gce-scale jobs: CONTROLLER_MANAGER_TEST_ARGS and SCHEDULER_TEST_ARGS
	// set --kube-api-qps=100): 100 requests per second (bursts of 100) for
	// both, 5 Job syncs at once. The benchmark's default: a cluster sized
	// for thousands of nodes is tuned at least this far.
	ControlPlaneScale = "scale"
	// ControlPlaneFast: the local cluster's settings for tests, 1,000
	// requests per second (2,000) and 20 Job syncs: a bound no real
	// cluster runs, which leaves Recreate only the API server's cost.
	ControlPlaneFast = "fast"
)

// ControlPlanes maps a control-plane profile to the local cluster's
// options.
var ControlPlanes = map[string]cluster.Options{
	ControlPlaneDefaults: {ControllerManagerClient: cluster.ControllerManagerClientDefault, SchedulerClient: cluster.SchedulerClientDefault, ConcurrentJobSyncs: 5},
	ControlPlaneScale:    {ControllerManagerClient: cluster.ClientRate{QPS: 100, Burst: 100}, SchedulerClient: cluster.ClientRate{QPS: 100, Burst: 100}, ConcurrentJobSyncs: 5},
	ControlPlaneFast:     {ControllerManagerClient: cluster.ClientRate{QPS: 1000, Burst: 2000}, SchedulerClient: cluster.ClientRate{QPS: 1000, Burst: 2000}, ConcurrentJobSyncs: 20},
}

// Config says what to measure.
type Config struct {
	// Nodes lists the sizes, one simulated node and one worker Pod each;
	// with RealNodes, the number of worker Pods on the real nodes.
	Nodes []int
	// RealNodes, if set, runs the JobSets on that many real nodes (a
	// kubelet and a containerd each) instead of simulated ones: profile
	// "real", no floor, every actor's requests counted from the API
	// server's audit log.
	RealNodes int
	// SupervisorVolume is the manager's agent.supervisorVolume on real
	// nodes: Image if empty (their containerd mounts image volumes).
	SupervisorVolume configv1alpha1.SupervisorVolume
	Repeats          int
	// FirstStartRounds, with RealNodes and no Repeats, runs every
	// strategy's JobSet that many times, one round of the strategies after
	// the other, so that each first start has a Recreate of its own round
	// to be set against: 1 if zero.
	FirstStartRounds int
	Profiles         []string
	// ControlPlane is the control-plane profile (ControlPlanes); empty
	// means ControlPlaneScale.
	ControlPlane string
	// NoManagerFlowSchema leaves out the manager's FlowSchema and priority
	// level (config/manager/flowcontrol.yaml), which are installed by
	// default: its requests then share the agents' priority level.
	NoManagerFlowSchema bool
	Strategies          []Strategy
	Failures            []string
	// Floors are the kinds of floor measured once per size (FloorKinds);
	// nil measures every kind, empty none.
	Floors []string
	// CountPodChanges has each floor count its Pods' changes on a watch of
	// its own (Floor.PodChanges), which checks that every write changed its
	// Pod. The watch's events are then part of the floor's cost: off for
	// measurements.
	CountPodChanges bool
	// Timeout bounds one restart, and the deletion of one namespace.
	Timeout time.Duration
	// ProfileDir, if set, receives a CPU profile of this process per
	// restart, with the actors (controller, kubelets, agents) labelled.
	ProfileDir string
	// APIServerProfile, with ProfileDir, also profiles the API server for
	// that long from each failure.
	APIServerProfile time.Duration
	// Progress receives a line per measurement.
	Progress io.Writer
	Log      logr.Logger
}

// Report is everything measured.
type Report struct {
	Started time.Time `json:"started"`
	// ControlPlane is the control-plane profile every figure used.
	ControlPlane string `json:"controlPlane"`
	// SupervisorVolume is the manager's agent.supervisorVolume (real
	// nodes).
	SupervisorVolume configv1alpha1.SupervisorVolume `json:"supervisorVolume,omitempty"`
	// ManagerFlowSchema: the manager had its own priority level.
	ManagerFlowSchema bool     `json:"managerFlowSchema"`
	Floors            []Floor  `json:"floors"`
	Results           []Result `json:"results"`
	// FirstStarts are the JobSets' first starts, on real nodes.
	FirstStarts []FirstStart `json:"firstStarts,omitempty"`
}

// FirstStart is how long a new JobSet took from its creation until every
// worker ran, by the workers' own logs (real nodes), and the moments on
// the way, each from the creation until the last Pod's: every Pod seen by
// a watch, every agent's process up (its first log line), every epoch
// written (seen by a watch), the epoch synced.
type FirstStart struct {
	Nodes    int    `json:"nodes"`
	Strategy string `json:"strategy"`
	// Round is the round of the strategies it ran in, from 0.
	Round         int           `json:"round"`
	Took          time.Duration `json:"tookNanos"`
	PodsSeen      time.Duration `json:"podsSeenNanos,omitempty"`
	AgentsStarted time.Duration `json:"agentsStartedNanos,omitempty"`
	EpochsWritten time.Duration `json:"epochsWrittenNanos,omitempty"`
	Synced        time.Duration `json:"syncedNanos,omitempty"`
	// CPU is what the machine spent until the JobSet was steady, and who
	// spent it.
	CPU *FirstStartCPU `json:"cpu,omitempty"`
}

// rounds is the number of rounds of first starts: FirstStartRounds, 1 if
// zero.
func (cfg Config) rounds() int { return max(cfg.FirstStartRounds, 1) }

// validate refuses what cannot be measured before any cluster starts.
func (cfg Config) validate() error {
	if anyUpstream(cfg.Strategies) && cfg.RealNodes == 0 {
		return fmt.Errorf("strategies %s and %s run upstream JobSet's controller and agent, which need real nodes: set the number of real nodes", UpstreamInPlace, UpstreamRecreate)
	}
	if v := cfg.SupervisorVolume; v != "" && v != configv1alpha1.SupervisorVolumeImage && v != configv1alpha1.SupervisorVolumeEmptyDir {
		return fmt.Errorf("supervisor volume %q: use %s or %s", v, configv1alpha1.SupervisorVolumeImage, configv1alpha1.SupervisorVolumeEmptyDir)
	}
	if slices.Contains(cfg.Strategies, RecreateSidecar) && (cfg.RealNodes == 0 || cfg.Repeats > 0) {
		return fmt.Errorf("strategy %s measures first starts on real nodes only (repeats 0, real nodes set): it is the cost of one more container per Pod, which the simulated nodes do not model", RecreateSidecar)
	}
	if cfg.FirstStartRounds > 1 && (cfg.RealNodes == 0 || cfg.Repeats > 0 || anyUpstream(cfg.Strategies)) {
		return fmt.Errorf("%d rounds of first starts: they are measured on real nodes only, with repeats 0 and without upstream JobSet's strategies (its controller, once installed, stays)", cfg.FirstStartRounds)
	}
	if slices.Contains(cfg.Strategies, InPlaceInProcess) && (cfg.RealNodes == 0 || cfg.Repeats > 0) {
		return fmt.Errorf("strategy %s measures first starts on real nodes only (repeats 0, real nodes set): the simulated nodes model a worker's processes, not its control socket, and the test worker does not speak the worker protocol, so its restarts would be process scope's", InPlaceInProcess)
	}
	return nil
}

// Run measures, one local cluster per size.
func Run(ctx context.Context, cfg Config) (Report, error) {
	report := Report{Started: time.Now()}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.ControlPlane == "" {
		cfg.ControlPlane = ControlPlaneScale
	}
	controlPlane, ok := ControlPlanes[cfg.ControlPlane]
	if !ok {
		return report, fmt.Errorf("unknown control-plane profile %q: use %s, %s or %s", cfg.ControlPlane, ControlPlaneDefaults, ControlPlaneScale, ControlPlaneFast)
	}
	for i, kind := range cfg.Floors {
		if _, err := statusWrites(kind); err != nil {
			return report, err
		}
		if slices.Contains(cfg.Floors[:i], kind) {
			return report, fmt.Errorf("floor %q named twice", kind)
		}
	}
	if err := cfg.validate(); err != nil {
		return report, err
	}
	cfg.Strategies = upstreamLast(cfg.Strategies)
	if cfg.RealNodes > 0 {
		if cfg.SupervisorVolume == "" {
			cfg.SupervisorVolume = configv1alpha1.SupervisorVolumeImage
		}
		report.SupervisorVolume = cfg.SupervisorVolume
	}
	report.ControlPlane, report.ManagerFlowSchema = cfg.ControlPlane, !cfg.NoManagerFlowSchema
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}
	for _, n := range cfg.Nodes {
		if err := ensureFileLimit(n); err != nil {
			return report, err
		}
		if cfg.RealNodes > 0 {
			progress("N=%d: starting the local cluster with %d real nodes", n, cfg.RealNodes)
		} else {
			progress("N=%d: starting the local cluster with %d simulated nodes", n, n)
		}
		e, stop, err := startEnv(ctx, cfg, n, controlPlane)
		if err != nil {
			return report, err
		}
		e.profileDir, e.apiserverProfile = cfg.ProfileDir, cfg.APIServerProfile
		results, floors, err := e.measure(ctx, cfg, progress)
		if e.auditLog != "" && err == nil {
			err = countAudited(e.auditLog, results)
		}
		stop()
		report.Results = append(report.Results, results...)
		report.Floors = append(report.Floors, floors...)
		report.FirstStarts = append(report.FirstStarts, e.firstStarts...)
		if err != nil {
			return report, fmt.Errorf("at %d nodes: %w", n, err)
		}
	}
	return report, nil
}

func (e *env) measure(ctx context.Context, cfg Config, progress func(string, ...any)) ([]Result, []Floor, error) {
	var results []Result
	var floors []Floor
	kinds := cfg.Floors
	if kinds == nil {
		kinds = FloorKinds
	}
	measured := false
	profiles := cfg.Profiles
	if e.real {
		profiles = []string{ProfileReal}
	}
	for p, profile := range profiles {
		if !e.real {
			lat, ok := Profiles[profile]
			if !ok {
				return results, floors, fmt.Errorf("unknown profile %q: use %s or %s", profile, ProfileZero, ProfileRealistic)
			}
			e.sim.SetLatency(lat)
		}
		// Rounds of first starts take the strategies in turn, so that a
		// drift of the machine's speed touches every strategy alike.
		rounds := cfg.rounds()
		for round := range rounds {
			e.round = round
			for s, strategy := range cfg.Strategies {
				floorsNext := !e.real && !measured && strategy == InPlace && len(kinds) > 0
				// The last JobSet of a size on simulated nodes is left to the
				// cluster's end: deleting N Pods and Jobs takes the
				// controllers minutes at N = 5,000, and nothing is measured
				// after it. On real nodes the JobSet is deleted: its Pods'
				// containers then stop while their kubelets run, and not only
				// when the cluster's end kills the nodes. (Rounds run on real
				// nodes only: on simulated ones the last round is the only one.)
				last := !e.real && p == len(profiles)-1 && s == len(cfg.Strategies)-1 && round == rounds-1 && !floorsNext
				if strategy.upstream() && !e.upstream {
					progress("N=%d: handing the cluster to upstream JobSet's controller", e.nodes)
					if err := e.switchToUpstream(ctx); err != nil {
						return results, floors, fmt.Errorf("installing upstream JobSet: %w", err)
					}
				}
				rs, sample, err := e.scenario(ctx, cfg, profile, strategy, !last, progress)
				results = append(results, rs...)
				if err != nil {
					return results, floors, err
				}
				// The floors are measured once per size, on copies of the
				// in-place JobSet's Pods, while the cluster is otherwise idle.
				if !floorsNext || len(rs) == 0 || sample == nil {
					continue
				}
				measured = true
				for _, kind := range kinds {
					f, err := e.floor(ctx, kind, sample, cfg.Timeout, cfg.CountPodChanges)
					if err != nil {
						return results, floors, fmt.Errorf("measuring the %s floor: %w", kind, err)
					}
					floors = append(floors, f)
					changes := ""
					if cfg.CountPodChanges {
						changes = fmt.Sprintf(", %d Pod changes", f.PodChanges)
					}
					progress("N=%d %s floor (%d status writes/Pod): %v (agents %v, status writes %v), %d requests for %d needed%s, %.0f watch events, control plane %.1f CPU-s",
						e.nodes, kind, f.StatusWritesPerPod, f.Total.Round(time.Millisecond), f.Agents.Round(time.Millisecond), f.StatusWrites.Round(time.Millisecond),
						total(f.Requests), total(f.Needed), changes, f.WatchEvents, controlPlaneCPU(f.CPUSeconds))
				}
			}
		}
	}
	return results, floors, nil
}

// scenario runs one JobSet of a strategy through every failure kind,
// repeated, and, if cleanUp, deletes it. It returns one of the JobSet's
// Pods, as it was after the last restart, for the floor to copy.
func (e *env) scenario(ctx context.Context, cfg Config, profile string, strategy Strategy, cleanUp bool, progress func(string, ...any)) (results []Result, sample *corev1.Pod, err error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: benchNamespacePrefix}}
	if err := e.client.Create(ctx, ns); err != nil {
		return nil, nil, err
	}
	defer func() {
		if !cleanUp {
			return
		}
		if derr := e.deleteNamespace(ctx, ns.Name, cfg.Timeout); derr != nil && err == nil {
			err = fmt.Errorf("deleting namespace %s: %w", ns.Name, derr)
		}
	}()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return e.client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{}) == nil, nil
	}); err != nil {
		return nil, nil, err
	}
	js := jobSetFor("train", ns.Name, e.nodes, strategy)
	if strategy == UpstreamInPlace {
		if err := e.upstreamAgents(ctx, js); err != nil {
			return nil, nil, err
		}
	}
	if e.real {
		realWorkers(js)
		if strategy == RecreateSidecar {
			idleSidecar(js)
		}
	}
	jw, err := e.watchJobSet(ctx, js)
	if err != nil {
		return nil, nil, err
	}
	defer jw.stop()
	var mark cpuMark
	if e.real {
		if err := e.waitPodsTornDown(ctx, cfg.Timeout); err != nil {
			return nil, nil, fmt.Errorf("%s: before the first start: %w", strategy, err)
		}
		mark = markCPU()
	}
	created := time.Now()
	if err := e.client.Create(ctx, js); err != nil {
		return nil, nil, err
	}
	if err := e.steady(ctx, js, jw, cfg.Timeout); err != nil {
		return nil, nil, fmt.Errorf("%s: the JobSet's %d workers did not all start: %w", strategy, e.nodes, err)
	}
	if e.real {
		// Read first: the JobSet's containers keep running. Without it
		// the first start still counts.
		cpu, cpuErr := e.firstStartCPU(ctx, ns.Name, strategy, mark)
		// What the agent costs a job at its first start: Recreate's
		// JobSets have none.
		starts, err := workerStartsFromLogs(ctx, e.cs, ns.Name, e.nodes, created, cfg.Timeout)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: first start: %w", strategy, err)
		}
		first := e.firstStart(ctx, js, jw, strategy, created, latest(starts, e.nodes))
		first.CPU = cpu
		e.firstStarts = append(e.firstStarts, first)
		progress("N=%d %-26s first start, round %d/%d: every worker running %v after the JobSet's creation (Pods seen %s, agents up %s, epochs written %s, synced %s)",
			e.nodes, strategy, e.round+1, cfg.rounds(), first.Took.Round(time.Millisecond), orDash(first.PodsSeen),
			orDash(first.AgentsStarted), orDash(first.EpochsWritten), orDash(first.Synced))
		if cpuErr != nil {
			progress("  CPU until steady not accounted: %v", cpuErr)
		} else {
			progress("  CPU until steady (%v): %.1f s busy of %d cores; %s", cpu.Window.Round(time.Millisecond), cpu.Busy, cpu.Cores, cpu.split())
		}
	}
	for repeat := range cfg.Repeats {
		for _, failure := range cfg.Failures {
			r, err := e.restart(ctx, js, jw, strategy, failure, cfg.Timeout)
			if err != nil {
				return results, nil, err
			}
			r.Profile, r.Repeat = profile, repeat
			results = append(results, r)
			progress("N=%d %-9s %-26s %-6s #%d: workers running after %v (exit written %v, failure seen %v, detection %v, %s busy before), controller writes %d, rejected by priority level %v",
				e.nodes, profile, strategy, failure, repeat, r.WorkersRunning.Round(time.Millisecond),
				r.ExitWritten.Round(time.Millisecond), r.FailureSeen.Round(time.Millisecond), r.Detection.Round(time.Millisecond), cores(r.LoadBefore), writes(r.Requests[ActorController]), r.Rejected)
			if r.FollowerCalls > 0 {
				progress("  the benchmark's JobSet follower listed or watched %d times before the restart was counted and synced: those times may be late by the time it took", r.FollowerCalls)
			}
			if err := e.steady(ctx, js, jw, cfg.Timeout); err != nil {
				return results, nil, fmt.Errorf("%s: not steady again after a %s: %w", strategy, failure, err)
			}
		}
	}
	var pods corev1.PodList
	if err := e.client.List(ctx, &pods, client.InNamespace(ns.Name), client.Limit(1)); err != nil {
		return results, nil, err
	}
	if len(pods.Items) > 0 {
		sample = &pods.Items[0]
	}
	return results, sample, nil
}

// deleteNamespace deletes a scenario's namespace and waits until its Pods
// are gone, so that they do not weigh on the next scenario. It deletes the
// Pods itself, at once, as `kubectl delete --grace-period=0 --force` does:
// left to the namespace controller, N graceful deletions, each finished by
// its kubelet, took more than ten minutes at N = 5,000, and after a single
// request deleting them all (a DeleteCollection) thousands were still there
// minutes later. Each poll deletes what is left, one request per Pod. Once
// the namespace is terminating no Job can create a Pod in it again.
//
// It then waits until the namespace itself is gone: while the namespace
// controller deleted its Jobs the JobSet was still there, and its
// controller tried to create them again (1,751 refused creations at
// N = 1,000, counted in the next scenario's first restart). Within
// timeout: a fixed ten minutes was too short for 5,000 Pods once.
func (e *env) deleteNamespace(ctx context.Context, name string, timeout time.Duration) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_ = e.client.Delete(context.Background(), ns)
	return wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		var pods metav1.PartialObjectMetadataList
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := e.client.List(ctx, &pods, client.InNamespace(name)); err != nil {
			return false, nil
		}
		_ = parallel(ctx, len(pods.Items), 50, func(ctx context.Context, i int) error {
			return e.client.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0))
		})
		if len(pods.Items) > 0 {
			return false, nil
		}
		return apierrors.IsNotFound(e.client.Get(ctx, client.ObjectKeyFromObject(ns), ns)), nil
	})
}

// Strategy is a restart strategy as the benchmark runs it: a JobSet's
// restart strategy, and for InPlaceRestart its restart scope.
type Strategy string

// The strategies.
const (
	InPlace        = Strategy(jobset.InPlaceRestart)
	InPlaceProcess = Strategy(jobset.InPlaceRestart + "/process")
	// InPlaceProcessPodReports is process scope with the agents writing
	// their Pods (protocol.AgentReportsAnnotation), as before direct
	// reports.
	InPlaceProcessPodReports = Strategy(jobset.InPlaceRestart + "/process/pod-reports")
	// InPlaceInProcess is in-process scope (real nodes only). The test
	// worker does not speak the worker protocol: its supervisor stops it
	// at a restart, as in process scope. Its first start is what
	// in-process scope costs a job that does.
	InPlaceInProcess = Strategy(jobset.InPlaceRestart + "/in-process")
	Recreate         = Strategy(jobset.Recreate)
	BlockingRecreate = Strategy(jobset.BlockingRecreate)
	// RecreateSidecar is Recreate with an idle native sidecar in every
	// Pod (the test worker's pause: no hook, no probe, no barrier), first
	// starts on real nodes only. What one more container per Pod costs a
	// first start: the least any per-Pod agent can cost.
	RecreateSidecar = Strategy(jobset.Recreate + "/sidecar")
	// UpstreamInPlace and UpstreamRecreate run upstream JobSet's
	// controller instead of inplace's (real nodes only): installed from
	// its module's manifests, as its release does, once every strategy of
	// inplace's was measured on the same nodes. In place, the JobSet runs
	// upstream's sidecar-mode example's agent and restart rules.
	UpstreamInPlace  = Strategy(upstreamPrefix + jobset.InPlaceRestart)
	UpstreamRecreate = Strategy(upstreamPrefix + jobset.Recreate)
)

// upstreamPrefix marks the strategies run by upstream JobSet's controller.
const upstreamPrefix = "upstream/"

// restartStrategy is the JobSet's restart strategy.
func (s Strategy) restartStrategy() jobset.JobSetRestartStrategy {
	if s.supervised() {
		return jobset.InPlaceRestart
	}
	if s == RecreateSidecar {
		return jobset.Recreate
	}
	return jobset.JobSetRestartStrategy(strings.TrimPrefix(string(s), upstreamPrefix))
}

// upstream reports whether upstream JobSet's controller runs the JobSet.
func (s Strategy) upstream() bool { return strings.HasPrefix(string(s), upstreamPrefix) }

// agentContainer is the name of the agent's container in the JobSet's
// Pods.
func (s Strategy) agentContainer() string {
	if s.upstream() {
		return upstreamjobset.AgentContainer
	}
	return agentContainer
}

// supervised reports whether the JobSet's workers run under the
// supervisor: process or in-process scope.
func (s Strategy) supervised() bool {
	return s == InPlaceProcess || s == InPlaceProcessPodReports || s == InPlaceInProcess
}

// scope is the JobSet's restart scope annotation, for a supervised one.
func (s Strategy) scope() string {
	if s == InPlaceInProcess {
		return protocol.RestartScopeInProcess
	}
	return protocol.RestartScopeProcess
}

// podReports reports whether the agents write their Pods instead of
// reporting to the controller.
func (s Strategy) podReports() bool { return s == InPlaceProcessPodReports }

// ParseStrategies reads a comma-separated list of restart strategies.
func ParseStrategies(s string) ([]Strategy, error) {
	var out []Strategy
	for _, name := range strings.Split(s, ",") {
		switch st := Strategy(strings.TrimSpace(name)); st {
		case InPlace, InPlaceProcess, InPlaceProcessPodReports, InPlaceInProcess, Recreate, RecreateSidecar, BlockingRecreate, UpstreamInPlace, UpstreamRecreate:
			out = append(out, st)
		default:
			return nil, fmt.Errorf("unknown restart strategy %q: use %s, %s, %s, %s, %s, %s, %s, %s or %s", name, InPlace, InPlaceProcess, InPlaceProcessPodReports, InPlaceInProcess, Recreate, RecreateSidecar, BlockingRecreate, UpstreamInPlace, UpstreamRecreate)
		}
	}
	return out, nil
}

// upstreamLast orders the strategies as Run measures them: upstream's
// controller takes a cluster over from inplace's, and does not give it
// back.
func upstreamLast(strategies []Strategy) []Strategy {
	out := slices.Clone(strategies)
	slices.SortStableFunc(out, func(a, b Strategy) int {
		switch {
		case a.upstream() == b.upstream():
			return 0
		case a.upstream():
			return 1
		}
		return -1
	})
	return out
}

// anyUpstream reports whether any of the strategies runs upstream's
// controller.
func anyUpstream(strategies []Strategy) bool {
	return slices.ContainsFunc(strategies, Strategy.upstream)
}

// firstStart splits a JobSet's first start, from its creation until
// workersRunning, by what the real nodes' Pods recorded on the way.
func (e *env) firstStart(ctx context.Context, js *jobset.JobSet, jw *jobSetWatch, strategy Strategy, created, workersRunning time.Time) FirstStart {
	byKind := map[simnode.EventKind]map[string]time.Time{}
	for _, ev := range e.recorder.Events(js.Namespace) {
		if byKind[ev.Kind] == nil {
			byKind[ev.Kind] = map[string]time.Time{}
		}
		if _, seen := byKind[ev.Kind][ev.Pod]; !seen {
			byKind[ev.Kind][ev.Pod] = ev.Time
		}
	}
	first := FirstStart{Nodes: e.nodes, Strategy: string(strategy), Round: e.round, Took: workersRunning.Sub(created),
		PodsSeen: since(created, latest(byKind[simnode.PodObserved], e.nodes)),
	}
	if strategy.restartStrategy() != jobset.InPlaceRestart {
		return first // no agent
	}
	// The agents' first log lines say when their processes were up; the
	// kubelets' status writes say it a sync later.
	agents := byKind[simnode.AgentStarted]
	if logged, err := firstLogLines(ctx, e.cs, js.Namespace, strategy.agentContainer()); err == nil {
		agents = logged
	}
	first.AgentsStarted = since(created, latest(agents, e.nodes))
	first.EpochsWritten = since(created, latest(byKind[simnode.EpochWritten], e.nodes))
	first.Synced = since(created, jw.first(created, func(s jobset.JobSetStatus) bool { return s.SyncedEpoch > 0 }))
	return first
}
