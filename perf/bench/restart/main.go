package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/perf/bench/stats"
	"github.com/inplace-dev/inplace/perf/restartbench"
)

func main() {
	nodes := flag.String("nodes", "100,1000,5000", "comma-separated sizes: simulated nodes, one worker Pod each (with -real-nodes: worker Pods on the real nodes)")
	realNodes := flag.Int("real-nodes", 0, "run the Pods on this many real nodes (a kubelet and a containerd each; needs root) instead of simulated ones")
	supervisorVolume := flag.String("supervisor-volume", "Image", "with -real-nodes, the manager's agent.supervisorVolume: Image (the workers run the supervisor from an image volume of the agent's image) or EmptyDir (the agent's postStart hook copies it)")
	repeats := flag.Int("repeats", 5, "restarts per strategy, failure kind and profile")
	firstStartRounds := flag.Int("first-start-rounds", 1, "with -real-nodes and -repeats 0, run every strategy's JobSet this many times, the strategies in turn, and set each first start against Recreate's of its round (not with upstream strategies); an odd count gives true medians, an even one the upper middle")
	profiles := flag.String("profiles", "zero,realistic", "node latency profiles: zero, realistic")
	controlPlane := flag.String("control-plane", restartbench.ControlPlaneScale, "control-plane profile (client rate limits of kube-controller-manager and kube-scheduler): defaults (theirs: 20 and 50 requests/s), scale (Kubernetes' 5,000-node tests: 100), fast (the test cluster's: 1,000)")
	noFlowSchema := flag.Bool("no-manager-flow-schema", false, "leave out the manager's FlowSchema and priority level (config/manager/flowcontrol.yaml): its requests then share the agents' priority level")
	strategies := flag.String("strategies", "InPlaceRestart,InPlaceRestart/process,Recreate,BlockingRecreate", "restart strategies: InPlaceRestart (container scope), InPlaceRestart/process (process scope), InPlaceRestart/in-process (in-process scope: first starts only, -repeats 0, on real nodes; the test worker does not speak the worker protocol), Recreate, Recreate/sidecar (Recreate with an idle native sidecar per Pod: first starts only, -repeats 0, on real nodes), BlockingRecreate; with -real-nodes also upstream/InPlaceRestart and upstream/Recreate, run by upstream JobSet's controller and agent (v0.12.0, built from its module) on the same nodes once inplace's are measured")
	failures := flag.String("failures", "exit,delete", "failure kinds: exit (a worker exits 1), delete (a Pod is deleted)")
	floors := flag.String("floors", strings.Join(restartbench.FloorKinds, ","), "floors measured once per size: needed (the status writes a kubelet cannot do without: 2 per Pod), kubelet (the status writes a kubelet makes: 6 per Pod, and longer to measure); empty for none")
	timeout := flag.Duration("timeout", 15*time.Minute, "bound on one restart, and on deleting one scenario's namespace")
	out := flag.String("out", ".local/bench/restart.json", "JSON results")
	profileDir := flag.String("cpuprofile", "", "directory for a CPU profile of inplace-manager, the simulated nodes and the agents per restart (label \"actor\" tells them apart)")
	logPath := flag.String("log", "", "file for the logs of the simulated nodes and the agents (discarded by default)")
	apiserverProfile := flag.Duration("apiserver-profile", 0, "with -cpuprofile: also profile kube-apiserver for this long from each failure")
	flag.Parse()
	// This process runs N simulated nodes' kubelets and agents, whose
	// garbage collection would otherwise take the CPU the control plane
	// needs (at N = 5,000 it was the process's largest cost); on a real
	// cluster they run on their own nodes. GOGC still overrides it.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	// The heap GOGC=400 allows would outgrow the machine at N = 10,000
	// (the control plane shares it): past half its memory the collector
	// runs as often as it must instead. GOMEMLIMIT still overrides it.
	if os.Getenv("GOMEMLIMIT") == "" {
		if limit := memoryAvailable(); limit > 0 {
			debug.SetMemoryLimit(limit / 2)
		}
	}
	// client-go's complaints about watches the agents close on restart
	// would drown the table.
	klog.SetLogger(logr.Discard())
	managerLog := logr.Discard()

	log := logr.Discard()
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fail(fmt.Errorf("-log: %w", err))
		}
		defer f.Close()
		var mu sync.Mutex
		write := func(prefix, args string) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintln(f, time.Now().Format(time.StampMicro), prefix, args)
		}
		log = funcr.New(write, funcr.Options{Verbosity: 1})
		// The manager's reconciles, each begun and ended (controller-runtime
		// logs them at level 5): where the controller's part of a detection
		// goes.
		managerLog = funcr.New(write, funcr.Options{Verbosity: 5}).WithName("manager")
	}
	ctrllog.SetLogger(managerLog)
	cfg := restartbench.Config{RealNodes: *realNodes, Repeats: *repeats, FirstStartRounds: *firstStartRounds, Timeout: *timeout, Progress: os.Stderr, Log: log, ControlPlane: *controlPlane, NoManagerFlowSchema: *noFlowSchema,
		Profiles: split(*profiles), Failures: split(*failures), Floors: nonNil(split(*floors)), ProfileDir: *profileDir, APIServerProfile: *apiserverProfile,
		SupervisorVolume: configv1alpha1.SupervisorVolume(*supervisorVolume)}
	for _, s := range split(*nodes) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fail(fmt.Errorf("-nodes: %q is not a positive number", s))
		}
		cfg.Nodes = append(cfg.Nodes, n)
	}
	var err error
	if cfg.Strategies, err = restartbench.ParseStrategies(*strategies); err != nil {
		fail(fmt.Errorf("-strategies: %w", err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, err := restartbench.Run(ctx, cfg)
	// Whatever was measured is printed and kept, also after an error.
	fmt.Println()
	restartbench.Table(os.Stdout, report)
	restartbench.Timeline(os.Stdout, report)
	restartbench.FirstStarts(os.Stdout, report)
	restartbench.FirstStartCPUs(os.Stdout, report)
	restartbench.RequestBreakdown(os.Stdout, report)
	if werr := stats.WriteJSON(*out, map[string]any{"report": report, "summary": restartbench.Summarize(report.Results)}); werr != nil {
		fail(werr)
	}
	fmt.Println("\nresults in", *out)
	charts, cerr := restartbench.Charts(filepath.Dir(*out), report)
	for _, c := range charts {
		fmt.Println("chart", c)
	}
	if cerr != nil {
		fail(fmt.Errorf("drawing the charts: %w", cerr))
	}
	if err != nil {
		fail(err)
	}
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// nonNil keeps an empty list empty: a nil Config.Floors means every floor.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench-restart:", err)
	os.Exit(1)
}

// memoryAvailable is the machine's memory, or the memory limit of this
// process's cgroup (v2, else v1) where that is lower; 0 if unknown.
func memoryAvailable() int64 {
	var total int64
	var info syscall.Sysinfo_t
	if err := syscall.Sysinfo(&info); err == nil {
		total = int64(info.Totalram) * int64(info.Unit)
	}
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// "max", or v1's page-rounded maximum, mean no limit.
		if limit, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64); err == nil && limit > 0 && (total == 0 || limit < total) {
			total = limit
		}
		break
	}
	return total
}
