package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	managerapp "github.com/inplace-dev/inplace/cmd/manager/app"
	"github.com/inplace-dev/inplace/test/cluster"
	example "github.com/inplace-dev/inplace/test/pytorch"
	"github.com/inplace-dev/inplace/test/util"
)

const (
	steps           = 200
	checkpointEvery = 20
	ranksPerPod     = 2
	agentContainer  = "inplace-agent"
	waitLimit       = 5 * time.Minute

	// The strategies the demo knows: in place in container scope (the
	// kubelet restarts every container), in place in process scope (the
	// supervisor restarts the worker process in its container), in place
	// in-process (the ranks that did not fail run on in their processes),
	// Recreate.
	containerScope = string(jobset.InPlaceRestart)
	processScope   = string(jobset.InPlaceRestart) + "/" + protocol.RestartScopeProcess
	inProcessScope = string(jobset.InPlaceRestart) + "/" + protocol.RestartScopeInProcess
	recreate       = string(jobset.Recreate)
	// barrierLifted is what the supervisor logs, in the worker's
	// container, when it starts the worker after the first restart: in
	// process scope one log holds both runs, and this line splits them.
	barrierLifted = "inplace-supervisor: barrier of epoch 2 lifted"
)

var strategies = []string{containerScope, processScope, inProcessScope, recreate}

func main() {
	kubeconfig := flag.String("cluster-kubeconfig", ".local/kubeconfig", "kubeconfig of the local cluster")
	kubectl := flag.String("kubectl", "bin/kubectl", "kubectl, to crash a rank as a person would")
	repeats := flag.Int("repeats", 1, "runs of each restart strategy")
	jsonOut := flag.String("json", "", "write every run's figures here as JSON")
	only := flag.String("strategies", strings.Join(strategies, ","), "restart strategies to run, in this order: "+strings.Join(strategies, ", "))
	flag.Parse()
	chosen := strings.Split(*only, ",")
	for _, s := range chosen {
		if !slices.Contains(strategies, s) {
			fmt.Fprintf(os.Stderr, "demo-pytorch: -strategies: unknown strategy %q: use some of %s\n", s, strings.Join(strategies, ", "))
			os.Exit(2)
		}
	}
	if err := run(*kubeconfig, *kubectl, *repeats, *jsonOut, chosen); err != nil {
		fmt.Fprintln(os.Stderr, "demo-pytorch:", err)
		os.Exit(1)
	}
}

type demo struct {
	c                   client.Client
	cs                  kubernetes.Interface
	kubeconfig, kubectl string
	root                string
}

// Result is one run: the stages of the restart in seconds after the crash
// (0 where a strategy has no such stage), and the training it lost.
type Result struct {
	Strategy        string  `json:"strategy"`
	CrashStep       int     `json:"crashStep"`
	ResumedStep     int     `json:"resumedStep"`
	StepSeconds     float64 `json:"stepSeconds"`
	AgentsRestarted float64 `json:"agentsRestarted,omitempty"`
	// In process and in-process scope: the failed worker's exit (or, in
	// in-process scope, its word that it fails) seen by its supervisor,
	// the new epoch seen by every other supervisor, and, in-process,
	// every other worker parked and the failed worker's process ended.
	ExitSeen        float64 `json:"exitSeen,omitempty"`
	FailedEnded     float64 `json:"failedEnded,omitempty"`
	EpochReachedAll float64 `json:"epochReachedAll,omitempty"`
	Parked          float64 `json:"parked,omitempty"`
	BarrierLifted   float64 `json:"barrierLifted,omitempty"`
	WorkersStarted  float64 `json:"workersStarted"`
	Resumed         float64 `json:"processGroupReformed"`
	FirstStep       float64 `json:"firstStepAfterResume"`
	RedoneSteps     int     `json:"redoneSteps"`
	LostSeconds     float64 `json:"trainingLostSeconds"`
}

func run(kubeconfig, kubectl string, repeats int, jsonOut string, chosen []string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: managerapp.NewScheme()})
	if err != nil {
		return err
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	d := &demo{c: c, cs: kubernetes.NewForConfigOrDie(cfg), kubeconfig: kubeconfig, kubectl: kubectl, root: root}
	ctx := context.Background()
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return err
	}
	real := 0
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") {
			real++
		}
	}
	if real < 2 {
		return fmt.Errorf("the example needs 2 real nodes, the cluster has %d: 'make cluster-up REAL_NODES=2' (or 'make demo-pytorch')", real)
	}
	fmt.Printf("== nodes: %d real (kubelet and containerd)\n", real)

	var results []Result
	for i := range repeats {
		for _, strategy := range chosen {
			r, err := d.scenario(ctx, strategy, i)
			if err != nil {
				return fmt.Errorf("%s: %w", strategy, err)
			}
			results = append(results, r)
		}
	}
	printTable(results, chosen)
	if jsonOut != "" {
		data, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(jsonOut), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(jsonOut, data, 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", jsonOut)
	}
	return nil
}

func (d *demo) scenario(ctx context.Context, strategy string, i int) (res Result, err error) {
	res.Strategy = strategy
	inPlace, inProcess := strategy != recreate, strategy == inProcessScope
	// Process and in-process: the containers run on, and each log holds
	// both runs.
	process := strategy == processScope || inProcess
	ns := fmt.Sprintf("pytorch-%s-%d-%d", strings.ToLower(strings.ReplaceAll(strategy, "/", "-")), i, time.Now().Unix())
	if err := d.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return res, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w (namespace %s kept)", err, ns)
			return
		}
		_ = d.c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}()
	manifest := example.Manifest
	if inProcess {
		manifest = example.InProcessManifest
	}
	ex, err := example.LoadManifest(d.root, ns, manifest)
	if err != nil {
		return res, err
	}
	ex.SetRun(steps, checkpointEvery)
	if strategy == processScope {
		util.SetRestartScope(ex.JobSet, protocol.RestartScopeProcess)
	}
	if strategy == recreate {
		dir, err := os.MkdirTemp("", "inplace-pytorch-checkpoints-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(dir)
		if err := os.Chmod(dir, 0o777); err != nil {
			return res, err
		}
		ex.UseRecreate(dir)
	}
	if err := d.waitForServiceAccount(ctx, ns); err != nil {
		return res, err
	}
	if err := d.c.Create(ctx, ex.ServiceAccount); err != nil {
		return res, err
	}
	js := ex.JobSet
	if err := d.c.Create(ctx, js); err != nil {
		return res, err
	}
	fmt.Printf("\n== %s: examples/pytorch/%s in namespace %s, %d Pods x %d ranks (DDP over gloo), %d steps\n", strategy, manifest, ns, ex.Nodes(), ranksPerPod, steps)

	var pod0 corev1.Pod
	var firstLog string
	start := time.Now()
	err = poll(ctx, func() (bool, error) {
		pods, err := d.pods(ctx, js)
		if err != nil || len(pods) != ex.Nodes() || pods[0].Status.Phase != corev1.PodRunning {
			return false, err
		}
		pod0 = pods[0]
		firstLog = d.log(ctx, pod0, Options{})
		return example.ReadRun(example.ParseLog(firstLog, false)).LastSaved() > 0, nil
	})
	if err != nil {
		return res, fmt.Errorf("waiting for the first checkpoint: %w", err)
	}
	fmt.Printf("   first checkpoint %.1fs after the JobSet was created; the Pods:\n", time.Since(start).Seconds())
	if inProcess {
		// A rank's standby is ready seconds after the rank: a run longer
		// than the demo's finds one at every failure.
		err := poll(ctx, func() (bool, error) {
			pods, err := d.pods(ctx, js)
			if err != nil {
				return false, err
			}
			for _, p := range pods {
				for _, name := range ex.Containers() {
					if !strings.Contains(d.log(ctx, p, Options{Container: name}), "inplace-supervisor: standby ready") {
						return false, nil
					}
				}
			}
			return true, nil
		})
		if err != nil {
			return res, fmt.Errorf("waiting for every rank's standby: %w", err)
		}
		// The crash then comes as soon after a checkpoint as in the other
		// strategies: a step or two.
		saved := example.ReadRun(example.ParseLog(d.log(ctx, pod0, Options{}), false)).LastSaved()
		err = poll(ctx, func() (bool, error) {
			firstLog = d.log(ctx, pod0, Options{})
			return example.ReadRun(example.ParseLog(firstLog, false)).LastSaved() > saved, nil
		})
		if err != nil {
			return res, fmt.Errorf("waiting for the checkpoint after step %d: %w", saved, err)
		}
	}
	pods, _ := d.pods(ctx, js)
	for _, p := range pods {
		fmt.Printf("     %s on %s, %s\n", p.Name, p.Spec.NodeName, p.Status.PodIP)
	}
	fmt.Printf("   the log of %s so far, its end:\n", pod0.Name)
	for _, l := range tail(firstLog, 4) {
		fmt.Printf("     | %s\n", l)
	}

	followed := example.FollowLog(ctx, d.cs, pod0, true)
	fmt.Printf("   kubectl exec %s -c %s -- touch /tmp/inplace-crash\n", pod0.Name, example.Container)
	if out, err := exec.CommandContext(ctx, d.kubectl, "--kubeconfig", d.kubeconfig, "exec", "-n", ns, pod0.Name, "-c", example.Container,
		"--", "touch", "/tmp/inplace-crash").CombinedOutput(); err != nil {
		return res, fmt.Errorf("kubectl exec: %w: %s", err, out)
	}
	if err := poll(ctx, func() (bool, error) {
		var got jobset.JobSet
		if err := d.c.Get(ctx, client.ObjectKeyFromObject(js), &got); err != nil {
			return false, err
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, string(jobset.JobSetFailed)); c != nil && c.Status == metav1.ConditionTrue {
			return false, fmt.Errorf("the JobSet failed: %s", c.Message)
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, string(jobset.JobSetCompleted)), nil
	}); err != nil {
		return res, fmt.Errorf("waiting for the JobSet to complete: %w", err)
	}
	var got jobset.JobSet
	if err := d.c.Get(ctx, client.ObjectKeyFromObject(js), &got); err != nil {
		return res, err
	}

	crashedRun, _ := followed(waitLimit)
	if process {
		// The container ran on: its log holds the second run too.
		crashedRun, _, _ = splitRuns(crashedRun)
	}
	first := example.ReadRun(example.ParseLog(crashedRun, true))
	if !first.Crashed {
		return res, errors.New("the first run's log shows no crash")
	}
	pods, err = d.pods(ctx, js)
	if err != nil {
		return res, err
	}
	var workerLogs [][]example.Line
	var agentsRestarted, barrierLifted, workersStarted, exitSeen, epochReached, parked, failedEnded time.Time
	for _, p := range pods {
		for _, name := range ex.Containers() {
			log := d.log(ctx, p, Options{Timestamps: true, Container: name})
			for _, l := range example.ParseLog(log, true) {
				switch {
				case strings.Contains(l.Text, "inplace-supervisor: the worker of epoch 1 exited with code"),
					strings.Contains(l.Text, "inplace-supervisor: the worker of epoch 1 fails with code"):
					// The first: the worker that failed, not its peers.
					if exitSeen.IsZero() || l.Time.Before(exitSeen) {
						exitSeen = l.Time
					}
				case strings.Contains(l.Text, "inplace-supervisor: the failing worker of epoch 1 has ended"):
					failedEnded = latest(failedEnded, l.Time)
				case strings.Contains(l.Text, "inplace-supervisor: epoch 1 is over"):
					epochReached = latest(epochReached, l.Time)
				case strings.Contains(l.Text, "inplace-supervisor: the worker of epoch 1 parked in"):
					parked = latest(parked, l.Time)
				}
			}
			if process {
				_, second, lifted := splitRuns(log)
				if lifted.IsZero() {
					return res, fmt.Errorf("the log of %s in %s shows no %q: its supervisor did not start the worker again", name, p.Name, barrierLifted)
				}
				log, barrierLifted = second, latest(barrierLifted, lifted)
			}
			lines := example.ParseLog(log, true)
			workerLogs = append(workerLogs, lines)
			for _, l := range lines {
				// In-process, the rank that failed logs this once Python
				// has imported torch, the others at once.
				if !inProcess || strings.HasSuffix(l.Text, ") runs at epoch 2") {
					workersStarted = latest(workersStarted, l.Time)
					break
				}
			}
		}
		if inPlace && !process {
			agent := example.ParseLog(d.log(ctx, p, Options{Timestamps: true, Container: agentContainer}), true)
			for _, l := range agent {
				switch {
				case strings.Contains(l.Text, `"msg":"started"`):
					agentsRestarted = latest(agentsRestarted, l.Time)
				case strings.Contains(l.Text, `"msg":"barrier lifted"`):
					barrierLifted = latest(barrierLifted, l.Time)
				}
			}
		}
	}
	second := example.ReadRun(workerLogs...)
	resumed, err := second.ResumedStep(ex.Nodes() * ranksPerPod)
	if err != nil {
		var read []string
		for i, p := range pods {
			for j, name := range ex.Containers() {
				read = append(read, fmt.Sprintf("%s of %s (%s, %d lines)", name, p.Name, p.Status.Phase, len(workerLogs[i*len(ex.Containers())+j])))
			}
		}
		return res, fmt.Errorf("%w, in the logs of %s", err, strings.Join(read, ", "))
	}
	firstStep, ok := second.StepAt[resumed+1]
	if !ok {
		return res, fmt.Errorf("no step %d after the resume", resumed+1)
	}
	since := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return t.Sub(first.CrashAt).Seconds()
	}
	last := slices.Max(slices.Collect(maps.Keys(first.StepAt)))
	res.CrashStep, res.ResumedStep = first.CrashStep, resumed
	res.StepSeconds = first.StepAt[last].Sub(first.StepAt[1]).Seconds() / float64(last-1)
	res.AgentsRestarted, res.BarrierLifted = since(agentsRestarted), since(barrierLifted)
	res.ExitSeen, res.EpochReachedAll, res.Parked = since(exitSeen), since(epochReached), since(parked)
	res.FailedEnded = since(failedEnded)
	res.WorkersStarted, res.Resumed, res.FirstStep = since(workersStarted), since(second.ResumedAt), since(firstStep)
	res.RedoneSteps = first.CrashStep - 1 - resumed
	res.LostSeconds = res.FirstStep + float64(res.RedoneSteps)*res.StepSeconds

	fmt.Printf("   the restart (restarts %d, in place %d), seconds after the crash:\n", got.Status.Restarts, got.Status.InPlaceRestarts)
	fmt.Printf("     +%6.2fs  rank crashes at step %d (exit %d)\n", 0.0, first.CrashStep, first.CrashCode)
	if inPlace && !process {
		fmt.Printf("     +%6.2fs  every agent restarted in its Pod\n", res.AgentsRestarted)
	}
	if res.ExitSeen > 0 {
		fmt.Printf("     +%6.2fs  a supervisor hears of the failure (the worker's exit, or its word that it fails)\n", res.ExitSeen)
	}
	if res.EpochReachedAll > 0 {
		fmt.Printf("     +%6.2fs  the new epoch reaches every supervisor whose worker runs\n", res.EpochReachedAll)
	}
	if res.Parked > 0 {
		fmt.Printf("     +%6.2fs  every worker that did not fail parked, in its process\n", res.Parked)
	}
	if res.FailedEnded > 0 {
		fmt.Printf("     +%6.2fs  the failed rank's process has ended (its place is taken only then)\n", res.FailedEnded)
	}
	if inPlace {
		fmt.Printf("     +%6.2fs  barrier lifted in every Pod\n", res.BarrierLifted)
	}
	// The first line torchrun logs, once Python has imported it.
	what := "torchrun up again in every Pod (same Pods), its first line logged"
	switch {
	case inProcess:
		what = "every rank runs at epoch 2: the failed one in its standby (or a new process), the others in theirs"
	case process:
		what = "torchrun up again in every Pod (same containers), its first line logged"
	}
	if strategy == recreate {
		what = "torchrun up in every new Pod, its first line logged"
	}
	fmt.Printf("     +%6.2fs  %s\n", res.WorkersStarted, what)
	fmt.Printf("     +%6.2fs  process group re-formed: every rank resumed from checkpoint at step %d\n", res.Resumed, resumed)
	fmt.Printf("     +%6.2fs  first training step after the resume (step %d, loss %.4f; %.4f before the crash)\n", res.FirstStep, resumed+1, second.Loss[resumed+1], first.Loss[resumed])
	fmt.Printf("   training lost: %.2fs stopped + %d steps done again (%.2fs at %.3fs a step) = %.2fs\n",
		res.FirstStep, res.RedoneSteps, float64(res.RedoneSteps)*res.StepSeconds, res.StepSeconds, res.LostSeconds)
	if !second.Done {
		return res, errors.New("the JobSet completed, but no Pod logged the end of training")
	}
	fmt.Printf("   JobSet %s Completed: training done at step %d, loss %.4f\n", js.Name, steps, second.Loss[steps])
	return res, nil
}

// splitRuns splits the log of a container that ran on through a
// process-scope restart (read with timestamps) where the supervisor started
// the worker again: the first run, the second, and when the barrier
// lifted (zero, with the whole log as the first run, if it did not).
func splitRuns(log string) (first, second string, lifted time.Time) {
	first, second, found := strings.Cut(log, barrierLifted)
	if !found {
		return log, "", time.Time{}
	}
	// The marker's line began with its timestamp, now the first run's end.
	i := strings.LastIndexByte(first, '\n')
	if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(first[i+1:])); err == nil {
		lifted = t
	}
	// The rest of the marker's line (the worker's pid) is not the worker's.
	if _, after, ok := strings.Cut(second, "\n"); ok {
		second = after
	} else {
		second = ""
	}
	return first[:i+1], second, lifted
}

func printTable(results []Result, chosen []string) {
	fmt.Printf("\n== training lost per failure, seconds (mean of %d run(s) each; crash to first step after the resume, plus the steps since the checkpoint done again)\n", len(results)/len(chosen))
	fmt.Printf("   %-22s %9s %9s %9s %9s %9s %9s\n", "strategy", "agents", "barrier", "torchrun", "resumed", "1st step", "lost")
	means := map[string]Result{}
	n := map[string]float64{}
	for _, r := range results {
		m := means[r.Strategy]
		m.Strategy = r.Strategy
		m.AgentsRestarted += r.AgentsRestarted
		m.BarrierLifted += r.BarrierLifted
		m.WorkersStarted += r.WorkersStarted
		m.Resumed += r.Resumed
		m.FirstStep += r.FirstStep
		m.LostSeconds += r.LostSeconds
		means[r.Strategy] = m
		n[r.Strategy]++
	}
	for _, s := range chosen {
		m, k := means[s], n[s]
		fmt.Printf("   %-22s %9s %9s %9.2f %9.2f %9.2f %9.2f\n", s, dash(m.AgentsRestarted/k), dash(m.BarrierLifted/k), m.WorkersStarted/k, m.Resumed/k, m.FirstStep/k, m.LostSeconds/k)
	}
	re, ok := means[recreate]
	for _, s := range chosen {
		if in := means[s]; ok && s != recreate && in.LostSeconds > 0 {
			fmt.Printf("   Recreate loses %.1fx the training %s does\n", re.LostSeconds/in.LostSeconds, s)
		}
	}
}

func dash(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func tail(log string, n int) []string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	return lines[max(0, len(lines)-n):]
}

// Options say which log of a Pod to read.
type Options struct {
	Container  string
	Timestamps bool
}

func (d *demo) log(ctx context.Context, p corev1.Pod, o Options) string {
	if o.Container == "" {
		o.Container = example.Container
	}
	data, err := d.cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: o.Container, Timestamps: o.Timestamps}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return string(data)
}

func (d *demo) pods(ctx context.Context, js *jobset.JobSet) ([]corev1.Pod, error) {
	// Not deleted: the Pods of the current run, Recreate's included.
	var list corev1.PodList
	if err := d.c.List(ctx, &list, client.InNamespace(js.Namespace), client.MatchingLabels{jobset.JobSetNameKey: js.Name}); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return strings.Compare(a.Spec.Hostname, b.Spec.Hostname) })
	return out, nil
}

func (d *demo) waitForServiceAccount(ctx context.Context, ns string) error {
	return poll(ctx, func() (bool, error) {
		var sa corev1.ServiceAccount
		err := d.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &sa)
		return err == nil, client.IgnoreNotFound(err)
	})
}

func poll(ctx context.Context, cond func() (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitLimit, true, func(context.Context) (bool, error) { return cond() })
}
