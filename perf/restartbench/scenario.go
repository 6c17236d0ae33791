package restartbench

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/simnode"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// Failure kinds.
const (
	FailureExit   = "exit"   // one worker exits with code 1
	FailureDelete = "delete" // one Pod is deleted
)

// Result is one measured restart. Times are from the failure: the worker's
// exit as its node saw it, or the deletion request.
type Result struct {
	Nodes    int    `json:"nodes"`
	Profile  string `json:"profile"`
	Strategy string `json:"strategy"`
	Failure  string `json:"failure"`
	Repeat   int    `json:"repeat"`
	// ExitWritten: for a worker exit, the kubelet's status write that
	// reports it returned.
	ExitWritten time.Duration `json:"exitWrittenNanos,omitempty"`
	// FailureSeen: the failure shown by the API server (the kubelet's
	// write of the exit, or the deletion), as a watch of the victim saw it.
	FailureSeen time.Duration `json:"failureSeenNanos"`
	// LoadBefore: the cores each process kept busy in the second before
	// the failure (CPU-seconds per second).
	LoadBefore map[string]float64 `json:"loadBeforeFailure"`
	// Detection: the JobSet's restart counted (for InPlaceRestart, the
	// epoch deprecated).
	Detection time.Duration `json:"detectionNanos"`
	// AgentsRestarted: every agent started again (InPlaceRestart).
	AgentsRestarted time.Duration `json:"agentsRestartedNanos,omitempty"`
	// EpochsReported: every Pod's agent began writing the new epoch.
	EpochsReported time.Duration `json:"epochsReportedNanos,omitempty"`
	// EpochsWritten: every Pod's epoch write returned.
	EpochsWritten time.Duration `json:"epochsWrittenNanos,omitempty"`
	// Synced: status.syncedEpoch advanced (InPlaceRestart).
	Synced time.Duration `json:"syncedNanos,omitempty"`
	// WorkersRunning: every worker running again.
	WorkersRunning time.Duration `json:"workersRunningNanos"`
	// FollowerCalls: the lists and watches the benchmark's own follower
	// of the JobSet began from the failure until the last moment timed
	// from what it delivers (Detection; Synced), normally none. One (an
	// ended watch, watched again) may have made those late by the time it
	// took.
	FollowerCalls int `json:"jobSetFollowerCalls,omitempty"`
	// Requests by actor and "verb resource", from the failure until every
	// worker ran again.
	Requests map[string]map[string]int `json:"requests"`
	// CriticalRequests are the part of Requests sent before the group was
	// released: for an in-place restart until syncedEpoch advanced (the
	// requests the release waits for, or that compete with them), for the
	// others all of them. The rest (workers started, readiness, status)
	// follow the release.
	CriticalRequests map[string]map[string]int `json:"criticalPathRequests"`
	// Handshakes are the connections each actor opened meanwhile, each a
	// TLS handshake with the API server; counted for the agents, each of
	// which is a new process with a connection of its own.
	Handshakes map[string]int `json:"handshakes,omitempty"`
	// WatchEvents the API server sent meanwhile.
	WatchEvents float64 `json:"watchEvents"`
	// Rejected: requests API Priority and Fairness turned away meanwhile
	// (queue full or waited too long), by priority level; the clients
	// tried them again after the Retry-After the API server set.
	Rejected map[string]float64 `json:"rejectedRequests,omitempty"`
	// CPUSeconds each process used meanwhile: the control plane's
	// components and this one (ProcessBench).
	CPUSeconds map[string]float64 `json:"cpuSeconds"`

	// Running is how many workers ran at every change from the failure
	// until all ran again (simulated nodes): what the charts draw.
	Running []RunningAt `json:"running,omitempty"`

	// from, when the failure was injected, and to, when every worker ran
	// again: the window of the requests counted from the audit log.
	// released ends the critical path's part of it.
	from, to, released time.Time
}

// RunningAt is how many workers ran at a moment, from the failure.
type RunningAt struct {
	At      time.Duration `json:"atNanos"`
	Workers int           `json:"workers"`
}

// maxSeriesPoints bounds a restart's Running series in the JSON: at
// N = 5,000 a restart has 10,000 changes, and a chart a few hundred
// pixels wide shows no more.
const maxSeriesPoints = 500

// runningSeries follows how many of the n workers ran from t0, when all
// did, until to, when all did again, through the node's events: a worker
// that exits or is stopped stops running, one that starts runs, and a Pod
// first seen starting is a new one (Recreate's). Later events (an old
// Pod's stop reported after its replacement started) are not the
// restart's.
func runningSeries(events []simnode.Event, t0, to time.Time, n int) []RunningAt {
	stopped := map[string]bool{}
	running := n
	out := []RunningAt{{0, n}}
	for _, ev := range events {
		if ev.Time.Before(t0) || ev.Time.After(to) {
			continue
		}
		was := running
		switch ev.Kind {
		case simnode.WorkerExited, simnode.WorkersStopped:
			if !stopped[ev.Pod] {
				stopped[ev.Pod] = true
				running--
			}
		case simnode.WorkersStarted:
			if wasStopped, seen := stopped[ev.Pod]; wasStopped || !seen {
				stopped[ev.Pod] = false
				running++
			}
		}
		if running != was {
			out = append(out, RunningAt{ev.Time.Sub(t0), running})
		}
	}
	return thin(out, maxSeriesPoints)
}

// thin keeps at most max points of a series, evenly spaced by index, its
// lowest point and its last.
func thin(series []RunningAt, maxPoints int) []RunningAt {
	if len(series) <= maxPoints {
		return series
	}
	lowest := 0
	for i, p := range series {
		if p.Workers < series[lowest].Workers {
			lowest = i
		}
	}
	out := make([]RunningAt, 0, maxPoints)
	for j := range maxPoints - 2 {
		out = append(out, series[j*(len(series)-1)/(maxPoints-2)])
	}
	out = append(out, series[lowest], series[len(series)-1])
	slices.SortStableFunc(out, func(a, b RunningAt) int { return cmp.Compare(a.At, b.At) })
	return slices.Compact(out)
}

// jobSetFor is N worker Jobs of one Pod each, one per node. Under
// InPlaceRestart it says only that: the webhook injects the rest.
func jobSetFor(name, namespace string, nodes int, strategy Strategy) *jobset.JobSet {
	rj := wrappers.MakeReplicatedJob("workers").Replicas(int32(nodes)).Obj()
	if strategy.restartStrategy() == jobset.InPlaceRestart {
		rj.Template.Spec.BackoffLimit = nil
	}
	js := wrappers.MakeJobSet(name, namespace).ReplicatedJob(rj).
		FailurePolicy(&jobset.FailurePolicy{RestartStrategy: strategy.restartStrategy(), MaxRestarts: 1000}).Obj()
	if strategy.supervised() {
		js.Annotations = map[string]string{protocol.RestartScopeAnnotation: strategy.scope()}
		// Written out: the supervisor runs the command (the simulated
		// nodes run none; the real ones' is realWorkers').
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Command = []string{"train"}
	}
	if strategy.podReports() {
		js.Annotations[protocol.AgentReportsAnnotation] = protocol.AgentReportsPod
	}
	return js
}

// realWorkers makes a JobSet's workers the test worker, which the real
// nodes run (the simulated ones run any image).
func realWorkers(js *jobset.JobSet) {
	for i := range js.Spec.ReplicatedJobs {
		pod := &js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		pod.TerminationGracePeriodSeconds = ptr.To[int64](5)
		pod.Containers[0].Image = images.Worker
		// Written out: process scope runs it under the supervisor.
		pod.Containers[0].Command = []string{images.WorkerBinary, "run"}
	}
}

// idleSidecarName names the idle sidecar of Recreate/sidecar.
const idleSidecarName = "sidecar"

// idleSidecar gives every Pod of the JobSet a native sidecar that starts
// and waits, as an agent would stand in its Pod, but with no hook, no
// probe and no barrier.
func idleSidecar(js *jobset.JobSet) {
	for i := range js.Spec.ReplicatedJobs {
		pod := &js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		pod.InitContainers = append(pod.InitContainers, corev1.Container{
			Name: idleSidecarName, Image: images.Worker, Command: []string{images.WorkerBinary, "pause"},
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		})
	}
}

// steady waits until the JobSet's N Pods all run their workers and, under
// InPlaceRestart, sit at the synced epoch. It lists the Pods only once the
// JobSet's status counts every Job ready: a list of N Pods of 11 KB every
// poll weighed on the API server (55 MB at N = 5,000) while the JobSet was
// starting.
func (e *env) steady(ctx context.Context, js *jobset.JobSet, jw *jobSetWatch, timeout time.Duration) error {
	// What the last poll found missing, for the error of a timeout: without
	// it, a JobSet that did not become steady says nothing of why.
	var missing string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		st := jw.status()
		if js.Spec.FailurePolicy.RestartStrategy == jobset.InPlaceRestart && (st.SyncedEpoch == 0 || st.SyncedEpoch <= st.DeprecatedEpoch) {
			missing = fmt.Sprintf("the JobSet's status has syncedEpoch %d, deprecatedEpoch %d", st.SyncedEpoch, st.DeprecatedEpoch)
			return false, nil
		}
		ready := 0
		for _, rj := range st.ReplicatedJobsStatus {
			ready += int(rj.Ready)
		}
		if ready < e.nodes {
			missing = fmt.Sprintf("the JobSet's status counts %d of %d Jobs ready", ready, e.nodes)
			return false, nil
		}
		var pods corev1.PodList
		if err := e.client.List(ctx, &pods, client.InNamespace(js.Namespace), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}); err != nil {
			// A list cut short by the wait's own deadline says nothing
			// new: what the poll before found stays the reason.
			if ctx.Err() == nil {
				missing = fmt.Sprintf("listing the Pods: %v", err)
			}
			return false, nil
		}
		if len(pods.Items) != e.nodes {
			missing = fmt.Sprintf("%d Pods, want %d", len(pods.Items), e.nodes)
			return false, nil
		}
		if n, first := notRunning(pods.Items); n > 0 {
			missing = fmt.Sprintf("%d of %d Pods not running their workers (Pod %s)", n, len(pods.Items), first)
			return false, nil
		}
		return true, nil
	})
	if err != nil && missing != "" {
		return fmt.Errorf("%w; last seen: %s", err, missing)
	}
	return err
}

// notRunning counts the Pods that do not run their workers and says of the
// first why.
func notRunning(pods []corev1.Pod) (n int, first string) {
	for i := range pods {
		why := podNotRunning(&pods[i])
		if why == "" {
			continue
		}
		if n == 0 {
			first = pods[i].Name + " " + why
		}
		n++
	}
	return n, first
}

// podNotRunning says why a Pod is not running its workers, empty if it is.
func podNotRunning(p *corev1.Pod) string {
	switch {
	case p.DeletionTimestamp != nil:
		return "is being deleted"
	case p.Status.Phase != corev1.PodRunning:
		return fmt.Sprintf("is %s", cmp.Or(string(p.Status.Phase), "without a phase"))
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return fmt.Sprintf("has container %s not running", cs.Name)
		}
	}
	return ""
}

// restart injects one failure and measures the recovery.
func (e *env) restart(ctx context.Context, js *jobset.JobSet, jw *jobSetWatch, strategy Strategy, failure string, timeout time.Duration) (Result, error) {
	r := Result{Nodes: e.nodes, Strategy: string(strategy), Failure: failure}
	// A different victim each time: the Job controller delays the
	// replacement of a Job's failed Pod by a backoff that doubles with each
	// failure of that Job, and the first failure is the case to measure.
	// Only the victim's Job's Pod is read: a list of all N Pods right before
	// the failure left the API server and this process (which runs the
	// manager) busy with it while the failure was being detected.
	e.restarts++
	index := (e.nodes/2 + e.restarts*7) % e.nodes
	var pods corev1.PodList
	if err := e.client.List(ctx, &pods, client.InNamespace(js.Namespace), client.MatchingLabels{jobset.JobIndexKey: strconv.Itoa(index)}); err != nil {
		return r, err
	}
	if len(pods.Items) != 1 {
		return r, fmt.Errorf("%d Pods of job index %d in %s, want 1", len(pods.Items), index, js.Namespace)
	}
	victim := pods.Items[0]
	before := jw.status()
	e.forgetRequests()
	handshakesBefore := e.handshakes()
	apiBefore, err := e.apiServerCounters(ctx)
	if err != nil {
		return r, err
	}

	// This process holds the simulation beside the manager: N agents'
	// and kubelets' clients, 3 GB at N = 10,000, where a manager alone
	// holds its caches. Go collects a heap at least every 2 minutes,
	// and a collection of the simulation's heap that fell in a restart
	// (5–15 s of CPU on these 2 cores) made that restart twice as long.
	// Collected now, the heap is not collected again before the restart
	// has allocated as much as it holds.
	runtime.GC()

	// The load the failure meets: the CPU each process spends in the
	// second before it (the N Pods' probes, the previous restart's tail).
	// Detection is a chain of reactions, each as prompt as the cores are
	// free.
	if r.LoadBefore, err = e.cpu.load(ctx, time.Second); err != nil {
		return r, err
	}

	fw, err := watchFailure(ctx, e.cs, &victim)
	if err != nil {
		return r, err
	}
	defer fw.stop()

	stopProfile, err := e.startProfile(r, e.restarts)
	if err != nil {
		return r, err
	}
	defer stopProfile()
	cpuBefore := e.cpu.snapshot()
	cursor := e.recorder.Len()
	restartFrom := cursor
	injected := time.Now()
	r.from = injected
	var exited time.Time
	switch failure {
	case FailureExit:
		if e.real {
			if err := e.exitWorker(ctx, victim); err != nil {
				return r, err
			}
			// The worker has exited when the exec that told it to
			// returns: the real node records no moment of its own.
			exited = time.Now()
			break
		}
		patch := client.MergeFrom(victim.DeepCopy())
		metav1.SetMetaDataAnnotation(&victim.ObjectMeta, simnode.ExitCodeAnnotation, "1")
		if err := e.client.Patch(ctx, &victim, patch); err != nil {
			return r, err
		}
	case FailureDelete:
		if err := e.client.Delete(ctx, &victim); err != nil {
			return r, err
		}
	default:
		return r, fmt.Errorf("unknown failure kind %q", failure)
	}

	var workers, exitWritten time.Time
	t0 := exited
	started := map[string]time.Time{}
	if e.real {
		if failure == FailureDelete {
			t0 = injected
		}
		// The workers' own logs say when each started again.
		if started, err = workerStartsFromLogs(ctx, e.cs, js.Namespace, e.nodes, t0, timeout); err != nil {
			return r, fmt.Errorf("%s after a %s: %w", r.Strategy, failure, err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var events []simnode.Event
		events, cursor = e.recorder.EventsSince(js.Namespace, cursor)
		for _, ev := range events {
			switch {
			case ev.Time.Before(injected):
			case failure == FailureExit && ev.Kind == simnode.WorkerExited && ev.Pod == victim.Name && t0.IsZero():
				t0 = ev.Time
			case failure == FailureExit && ev.Kind == simnode.ExitWritten && ev.Pod == victim.Name && exitWritten.IsZero():
				exitWritten = ev.Time
			case ev.Kind == simnode.WorkersStarted && !e.real:
				started[ev.Pod] = ev.Time
			}
		}
		if failure == FailureDelete {
			t0 = injected
		}
		if t0.IsZero() || len(started) < e.nodes {
			return false, nil
		}
		for _, at := range started {
			if at.After(workers) {
				workers = at
			}
		}
		return true, nil
	})
	if err != nil {
		return r, fmt.Errorf("%s after a %s: not every worker ran again within %v: %s", r.Strategy, failure, timeout, e.notStarted(ctx, js.Namespace, restartFrom, started))
	}
	r.WorkersRunning, r.to = workers.Sub(t0), workers
	if !e.real {
		events, _ := e.recorder.EventsSince(js.Namespace, restartFrom)
		r.Running = runningSeries(events, t0, workers, e.nodes)
	}
	r.CPUSeconds = e.cpu.since(cpuBefore)
	stopProfile()
	r.Requests = e.requestsBetween(injected, workers)
	apiAfter, err := e.apiServerCounters(ctx)
	if err != nil {
		return r, err
	}
	r.WatchEvents, r.Rejected = apiAfter.since(apiBefore)
	r.Handshakes = map[string]int{}
	for actor, n := range e.handshakes() {
		if d := n - handshakesBefore[actor]; d > 0 {
			r.Handshakes[actor] = d
		}
	}

	// The JobSet's own progress, from its informer (it may trail the
	// workers by a watch event: wait for it briefly).
	counted := restartCounted(strategy, before)
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return counted(jw.status()), nil
	})
	detected := jw.first(injected, counted)
	// The last moment timed from the follower: the restart counted, or
	// for an in-place restart synced.
	lastTimed := detected
	r.ExitWritten, r.FailureSeen, r.Detection = since(t0, exitWritten), since(t0, fw.at()), since(t0, detected)
	// With the manager's reconciles in the same log (-log), what happened
	// between these three moments can be read off it.
	e.log.Info("failure", "strategy", r.Strategy, "kind", failure, "pod", victim.Name,
		"at", stamp(t0), "written", stamp(exitWritten), "seen", stamp(fw.at()), "detected", stamp(detected))
	if strategy.restartStrategy() == jobset.InPlaceRestart {
		newEpoch := before.SyncedEpoch + 1
		_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return jw.status().SyncedEpoch >= newEpoch, nil
		})
		lastTimed = jw.first(injected, func(s jobset.JobSetStatus) bool { return s.SyncedEpoch >= newEpoch })
		r.Synced = since(t0, lastTimed)
		r.released = lastTimed
		agents, reported, written := map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
		events, _ := e.recorder.EventsSince(js.Namespace, restartFrom)
		for _, ev := range events {
			if ev.Time.Before(t0) {
				continue
			}
			switch {
			case ev.Kind == simnode.AgentStarted:
				agents[ev.Pod] = ev.Time
			case ev.Kind == simnode.EpochReported && ev.Epoch == newEpoch:
				if _, seen := reported[ev.Pod]; !seen {
					reported[ev.Pod] = ev.Time
				}
			case ev.Kind == simnode.EpochWritten && ev.Epoch == newEpoch:
				if _, seen := written[ev.Pod]; !seen {
					written[ev.Pod] = ev.Time
				}
			}
		}
		r.AgentsRestarted = since(t0, latest(agents, e.nodes))
		r.EpochsReported = since(t0, latest(reported, e.nodes))
		r.EpochsWritten = since(t0, latest(written, e.nodes))
	}
	if lastTimed.IsZero() { // never came: every call may have delayed it
		lastTimed = time.Now()
	}
	if r.released.IsZero() || r.released.After(r.to) {
		r.released = r.to
	}
	r.CriticalRequests = e.requestsBetween(injected, r.released)
	r.FollowerCalls = jw.callsBetween(injected, lastTimed)
	return r, nil
}

// restartCounted is when the JobSet's status shows the restart after
// before: its restarts counted, or, by upstream JobSet's controller in
// place, the attempt deprecated (it counts its in-place restarts nowhere
// else).
func restartCounted(strategy Strategy, before jobset.JobSetStatus) func(jobset.JobSetStatus) bool {
	if strategy.upstream() && strategy.restartStrategy() == jobset.InPlaceRestart {
		return func(s jobset.JobSetStatus) bool { return s.DeprecatedEpoch > before.DeprecatedEpoch }
	}
	return func(s jobset.JobSetStatus) bool { return s.Restarts > before.Restarts }
}

// exitWorker makes the victim's worker exit with code 1, as kubectl exec
// does. In process scope a container runs before its worker starts: a
// worker not started yet is waited for.
func (e *env) exitWorker(ctx context.Context, victim corev1.Pod) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = images.ExitWorker(ctx, e.kubectl, e.cluster.Kubeconfig, victim.Namespace, victim.Name, "worker", 1)
		if last != nil && strings.Contains(last.Error(), "no running worker") {
			return false, nil
		}
		return true, last
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

func stamp(t time.Time) string { return t.Format(time.StampMicro) }

// latest is the last of the times when there are n of them, else zero.
func latest(times map[string]time.Time, n int) time.Time {
	if len(times) < n {
		return time.Time{}
	}
	var last time.Time
	for _, t := range times {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// notStarted says which Pods of the namespace have no worker started since
// the failure (at most five), each with the last moment it recorded: what
// to read first when a restart does not end.
func (e *env) notStarted(ctx context.Context, namespace string, from int, started map[string]time.Time) string {
	var pods corev1.PodList
	if err := e.client.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return fmt.Sprintf("%d workers started; listing the Pods: %v", len(started), err)
	}
	events, _ := e.recorder.EventsSince(namespace, from)
	last := map[string]simnode.Event{}
	for _, ev := range events {
		last[ev.Pod] = ev
	}
	var missing []string
	for _, p := range pods.Items {
		if _, ok := started[p.Name]; ok || p.DeletionTimestamp != nil {
			continue
		}
		if len(missing) == 5 {
			missing = append(missing, "...")
			break
		}
		desc := p.Name + " (nothing recorded since the failure)"
		if ev, ok := last[p.Name]; ok {
			desc = fmt.Sprintf("%s (last %s at epoch %d, %s)", p.Name, ev.Kind, ev.Epoch, stamp(ev.Time))
		}
		missing = append(missing, desc)
	}
	return fmt.Sprintf("%d of %d workers started; not: %s", len(started), e.nodes, strings.Join(missing, ", "))
}
