package simnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/inplace-dev/inplace/agent"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

// podRunner runs one Pod, in incarnations: an in-place restart of every
// container (RestartAllContainers) starts a new incarnation of the same Pod.
type podRunner struct {
	sim                       *Sim
	uid                       types.UID
	namespace, name, nodeName string
	replicatedJob             string
	ip                        string

	mu       sync.Mutex
	latest   *corev1.Pod
	changed  chan struct{}
	cancel   context.CancelFunc
	restarts map[string]int32
	// epoch is the epoch the Pod's agent last reported.
	epoch int32
	// sandbox: the Pod's sandbox exists (its first start is behind it).
	sandbox bool
	// initialized: the Pod was initialized once (its Initialized
	// condition stays true through in-place restarts).
	initialized bool
	// lastTerm is each container's last termination, as the runtime
	// remembers it (the API may not have it yet).
	lastTerm map[string]corev1.ContainerState
	status   *statusManager
	// consumed holds the failure annotations acted on whose removal has
	// not been seen yet.
	consumed map[string]bool
	// written is the status last written, the base of the next patch.
	written *corev1.PodStatus
	// reportToken is the projected token of the Pod's agent for the
	// controller's audience, once requested.
	reportTok string
	// agentToken is the token bound to the Pod its agents authenticate
	// with, under Options.AgentConfig.
	agentToken string
	// agentState is the agent's state volume (an emptyDir): kept while
	// the Pod's containers restart in place, gone with the Pod.
	agentState agent.EndpointInMemory
}

func newPodRunner(s *Sim, pod *corev1.Pod, ip string) *podRunner {
	r := &podRunner{
		sim: s, uid: pod.UID, namespace: pod.Namespace, name: pod.Name, nodeName: pod.Spec.NodeName, ip: ip,
		replicatedJob: pod.Labels[jobset.ReplicatedJobNameKey],
		latest:        pod, changed: make(chan struct{}, 1), restarts: map[string]int32{},
		lastTerm: map[string]corev1.ContainerState{}, consumed: map[string]bool{},
	}
	r.status = newStatusManager(r)
	return r
}

func (r *podRunner) update(pod *corev1.Pod) {
	r.mu.Lock()
	for key := range r.consumed {
		if _, ok := pod.Annotations[key]; !ok {
			delete(r.consumed, key)
		}
	}
	r.latest = pod
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *podRunner) pod() *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest
}

func (r *podRunner) stop() {
	r.mu.Lock()
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// exit is a container's termination.
type exit struct {
	container string
	code      int32
}

func (r *podRunner) run(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	r.mu.Lock()
	r.cancel = cancel
	r.mu.Unlock()
	defer cancel()
	go r.status.run(ctx)

	for ctx.Err() == nil {
		if r.deleting() {
			r.finishDeletion(ctx)
			return
		}
		again, err := r.incarnation(ctx)
		if err != nil && ctx.Err() == nil {
			r.sim.opts.Log.Error(err, "simulated pod", "pod", r.namespace+"/"+r.name)
		}
		if !again {
			// Terminal: wait for deletion.
			for ctx.Err() == nil && !r.deleting() {
				select {
				case <-ctx.Done():
				case <-r.changed:
				}
			}
		}
	}
}

// incarnation starts every container of the Pod and runs until one exit
// ends it; it reports whether the Pod starts over (RestartAllContainers).
func (r *podRunner) incarnation(parent context.Context) (bool, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	pod := r.pod()
	spec := pod.Spec
	st := newStatus(pod, r.ip, r.restarts, r.lastTerm, &r.initialized)
	lat := r.sim.latency()
	if !r.sandbox {
		// A restarted Pod's containers were reported waiting when they
		// were removed; a new one's are reported waiting now.
		r.status.publish(st)
		if !spend(ctx, lat.PodStart+lat.ImagePull) {
			return true, nil
		}
		r.sandbox = true
	}

	exits := make(chan exit, 4)
	// agents stop a running agent and wait until it has exited: as with a
	// kubelet, a container starts again only once its previous run is dead
	// (and its port free).
	agents := map[string]context.CancelFunc{}
	startAgent := func(c corev1.Container) {
		actx, acancel := context.WithCancel(ctx)
		done := make(chan struct{})
		r.record(AgentStarted, 0)
		agents[c.Name] = func() { acancel(); <-done }
		go func() {
			defer close(done)
			// The label tells the agents' CPU from the kubelets' in a
			// profile of the process.
			var code int
			pprof.Do(actx, pprof.Labels("actor", "agents"), func(actx context.Context) { code = r.runAgent(actx, c) })
			if actx.Err() == nil {
				exits <- exit{c.Name, int32(code)}
			}
		}()
	}
	defer func() {
		for _, stop := range agents {
			stop()
		}
	}()

	for _, c := range spec.InitContainers {
		if ptr.Deref(c.RestartPolicy, "") != corev1.ContainerRestartPolicyAlways {
			// A regular init container runs to completion before the
			// next starts.
			if !spend(ctx, lat.ContainerStart) {
				return true, nil
			}
			st.setInit(c.Name, terminated(0, "Completed"))
			continue
		}
		if !spend(ctx, lat.ContainerStart) {
			return true, nil
		}
		if c.Name == r.sim.opts.AgentContainer {
			startAgent(c)
		}
		// As the kubelet reports a sidecar with a startup probe: running,
		// then started once the probe passed, then ready, each in a write
		// of its own.
		if c.StartupProbe != nil && c.StartupProbe.HTTPGet != nil {
			st.setProbing(c.Name)
			r.status.publish(st)
			r.status.flush(ctx)
			if e, ok := r.waitStartup(ctx, c, exits); !ok {
				if e == nil {
					return true, ctx.Err() // cancelled or being deleted
				}
				return r.handle(ctx, st, *e, agents, startAgent, exits)
			}
			if c.Name == r.sim.opts.AgentContainer {
				r.record(BarrierLifted, 0)
			}
			st.setStarted(c.Name)
			r.status.publish(st)
			r.status.flush(ctx)
		} else {
			st.setInit(c.Name, running())
		}
		st.setReady(c.Name)
	}
	// The Pod runs once its sidecars are ready, before its main containers
	// start, as the kubelet's phase says.
	st.running()
	r.status.publish(st)
	r.status.flush(ctx)
	if !spend(ctx, lat.ContainerStart) {
		return true, nil
	}
	// In process scope the containers run their supervisors, which start
	// the workers behind the barrier and record it.
	procs := map[string]*simProcesses{}
	for _, c := range spec.Containers {
		st.setMain(c.Name, running())
		if !protocol.IsSupervised(c.Command) {
			continue
		}
		p := newSimProcesses(r)
		procs[c.Name] = p
		go func() {
			code := r.runSupervisor(ctx, c, p)
			if ctx.Err() == nil {
				exits <- exit{c.Name, int32(code)}
			}
		}()
	}
	if len(procs) == 0 {
		r.record(WorkersStarted, 0)
	}
	r.status.publish(st)

	// driven applies the failure annotations; it runs once now, for what
	// arrived while the Pod was starting, and on every change.
	driven := func() bool {
		pod := r.pod()
		if pod.DeletionTimestamp != nil {
			return true
		}
		if v, ok := r.unconsumed(pod, ExitCodeAnnotation); ok {
			r.clearAnnotation(ctx, ExitCodeAnnotation)
			code, err := strconv.Atoi(v)
			switch {
			case err != nil || len(spec.Containers) == 0:
			case procs[spec.Containers[0].Name] != nil:
				// The worker exits; its supervisor decides what follows.
				procs[spec.Containers[0].Name].exit(code)
			default:
				exits <- exit{spec.Containers[0].Name, int32(code)}
			}
		}
		if v, ok := r.unconsumed(pod, CrashAnnotation); ok && v == "agent" {
			r.clearAnnotation(ctx, CrashAnnotation)
			if stop, ok := agents[r.sim.opts.AgentContainer]; ok {
				stop()
				exits <- exit{r.sim.opts.AgentContainer, 1}
			}
		}
		return false
	}
	if driven() {
		return true, nil
	}
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case e := <-exits:
			again, err := r.handle(ctx, st, e, agents, startAgent, exits)
			if again || err != nil || st.terminal() {
				return again, err
			}
		case <-r.changed:
			if driven() {
				return true, nil
			}
		}
	}
}

// waitStartup probes a sidecar's startup probe until it passes; an exit
// meanwhile is returned.
func (r *podRunner) waitStartup(ctx context.Context, c corev1.Container, exits chan exit) (*exit, bool) {
	p := c.StartupProbe
	url := fmt.Sprintf("http://%s:%d%s", r.ip, p.HTTPGet.Port.IntValue(), p.HTTPGet.Path)
	period := time.Duration(max(p.PeriodSeconds, 1)) * time.Second
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	// Probing faster than the period would hide the barrier's real cost:
	// the kubelet probes every period, each probe waiting up to its
	// timeout, and starts the next one at the first tick after it.
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for failures := int32(0); ; {
		pctx, cancel := context.WithCancel(ctx)
		result := make(chan bool, 1)
		go func() { result <- probe(pctx, r.sim.prober, url, timeout) }()
		passed, e, stop := r.awaitProbe(ctx, result, exits)
		cancel()
		switch {
		case stop:
			return e, false
		case passed:
			return nil, true
		}
		failures++
		if p.FailureThreshold > 0 && failures >= p.FailureThreshold {
			return &exit{c.Name, 137}, false
		}
		select {
		case <-ctx.Done():
			return nil, false
		case e := <-exits:
			return &e, false
		case <-r.changed:
			// Annotations are looked at once the Pod runs; a deletion
			// ends the wait now.
			if r.deleting() {
				return nil, false
			}
		case <-ticker.C:
		}
	}
}

// awaitProbe waits for a probe's result, or for what ends the wait: the
// end of ctx, an exit, or the Pod's deletion (stop is then true).
func (r *podRunner) awaitProbe(ctx context.Context, result <-chan bool, exits chan exit) (passed bool, e *exit, stop bool) {
	for {
		select {
		case passed := <-result:
			return passed, nil, false
		case <-ctx.Done():
			return false, nil, true
		case e := <-exits:
			return false, &e, true
		case <-r.changed:
			if r.deleting() {
				return false, nil, true
			}
		}
	}
}

// handle applies a container exit: its restart rules, then its restart
// policy, as the kubelet does.
func (r *podRunner) handle(ctx context.Context, st *status, e exit, agents map[string]context.CancelFunc, startAgent func(corev1.Container), _ chan exit) (bool, error) {
	spec := r.pod().Spec
	c, isInit := findContainer(spec, e.container)
	if c == nil {
		return false, nil
	}
	action := exitAction(c, spec.RestartPolicy, isInit, e.code)
	if !isInit {
		r.record(WorkerExited, e.code)
	}
	term := terminated(e.code, reason(e.code))
	r.lastTerm[c.Name] = term
	if isInit {
		st.setInit(c.Name, term)
	} else {
		st.setMain(c.Name, term)
	}
	switch action {
	case actionRestartAll:
		// As the kubelet: the exit is reported with AllContainersRestarting,
		// the other containers stop, every container is reported removed
		// (waiting, its restart count up, its last state the removal's),
		// and the Pod starts over in its sandbox.
		st.restartingAll = true
		r.status.publish(st)
		r.status.flush(ctx)
		for _, stop := range agents {
			stop()
		}
		// The other containers take their time to stop.
		spend(ctx, r.stopTime(spec.TerminationGracePeriodSeconds))
		r.record(WorkersStopped, 0)
		st.restartingAll = false
		st.restartAll(r.restarts, r.lastTerm)
		r.status.publish(st)
		r.status.flush(ctx)
		return true, nil
	case actionRestart:
		r.restarts[c.Name]++
		st.restarted(c.Name, r.restarts[c.Name], isInit)
		if c.Name == r.sim.opts.AgentContainer {
			startAgent(*c)
		}
		if !isInit {
			r.record(WorkersStarted, 0)
		}
		r.status.publish(st)
		return false, nil
	default:
		if st.mainTerminated() {
			// As the kubelet (v1.36, measured): the workers' exit is
			// reported with the phase Running (a running sidecar keeps the
			// Pod Running; without one, the phase turns terminal only once
			// the Pod worker has stopped the Pod).
			r.status.publish(st)
			r.status.flush(ctx)
			var sidecars []string
			for _, ic := range spec.InitContainers {
				if ptr.Deref(ic.RestartPolicy, "") == corev1.ContainerRestartPolicyAlways {
					sidecars = append(sidecars, ic.Name)
				}
			}
			for name, stop := range agents {
				stop()
				delete(agents, name)
			}
			st.sandboxReady = false
			if st.anyRunning(sidecars) {
				// Running sidecars take their time to stop; their end and
				// the sandbox's removal are a write of their own before
				// the terminal phase.
				spend(ctx, r.stopTime(spec.TerminationGracePeriodSeconds))
				st.stopSidecars(sidecars)
				r.status.publish(st)
				r.status.flush(ctx)
			}
			// Without one, nothing is left to stop: the sandbox's removal
			// comes with the terminal phase, in the same write.
		}
		st.finish()
		r.status.publish(st)
		return false, nil
	}
}

type action int

const (
	actionNone action = iota
	actionRestart
	actionRestartAll
)

// exitAction decides what an exit does: the first matching restart rule,
// else the container's (or the Pod's) restart policy.
func exitAction(c *corev1.Container, podPolicy corev1.RestartPolicy, isInit bool, code int32) action {
	for _, rule := range c.RestartPolicyRules {
		if rule.ExitCodes == nil {
			continue
		}
		in := slices.Contains(rule.ExitCodes.Values, code)
		if (rule.ExitCodes.Operator == corev1.ContainerRestartRuleOnExitCodesOpIn) != in {
			continue
		}
		switch rule.Action {
		case corev1.ContainerRestartRuleActionRestartAllContainers:
			return actionRestartAll
		case corev1.ContainerRestartRuleActionRestart:
			return actionRestart
		}
	}
	policy := corev1.ContainerRestartPolicy(podPolicy)
	if c.RestartPolicy != nil {
		policy = *c.RestartPolicy
	}
	switch {
	case policy == corev1.ContainerRestartPolicyAlways:
		return actionRestart
	case policy == corev1.ContainerRestartPolicyOnFailure && code != 0:
		return actionRestart
	}
	return actionNone
}

// agentConfig is the configuration the agent binary reads from the
// environment the kubelet gives it at this start of container c.
func (r *podRunner) agentConfig(c *corev1.Container) (agent.Config, error) {
	env, err := containerEnv(r.pod(), c, r.ip)
	if err != nil {
		return agent.Config{}, err
	}
	cfg, err := agent.ConfigFromEnv(func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	})
	// The agent listens on its port of the Pod's address in the simulated
	// Pod network, which has no loopback: its supervisors reach it there.
	cfg.Listen = r.ip + cfg.Listen
	if cfg.Process != nil {
		cfg.Process.AnyPeer = true
	}
	return cfg, err
}

// runAgent runs the real agent for the Pod until it exits.
func (r *podRunner) runAgent(ctx context.Context, c corev1.Container) int {
	log := r.sim.opts.Log.WithValues("pod", r.namespace+"/"+r.name)
	cfg, err := r.agentConfig(&c)
	if err != nil {
		// As the kubelet fails a container whose environment it cannot
		// make.
		log.Error(err, "agent environment")
		return 1
	}
	pod := r.pod()
	// What the agent's process holds goes with it when it exits, as the
	// kernel closes a process's sockets: its goroutines (the broadcast's
	// watch or stream) end, then its connections to the leader close.
	var reportConns openConns
	defer reportConns.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, closeConns, err := r.agentClientset(ctx)
	if err != nil {
		log.Error(err, "agent credentials")
		return 1
	}
	defer closeConns()
	env, _ := containerEnv(pod, &c, r.ip)
	t := &recordingTransport{DirectTransport: &agent.DirectTransport{KubeTransport: &agent.KubeTransport{
		Client: cs, Namespace: r.namespace, Pod: r.name,
		JobSet: pod.Annotations[jobset.JobSetNameKey], Log: log,
	}, Dial: reportConns.dial(r.sim.podNet.DialReports)}, runner: r}
	// The webhook gave the agent a projected token for the controller's
	// audience: the kubelet requests it, bound to the Pod, before it
	// starts the container.
	if env[protocol.EnvReportTokenPath] != "" {
		if audience, expiry, ok := reportTokenProjection(pod); ok {
			t.Token = func() (string, error) { return r.reportToken(ctx, audience, expiry) }
		}
	}
	// And a state volume, which outlives the agent's container.
	if env[protocol.EnvAgentStateDir] != "" && mountsVolume(&c, pod, env[protocol.EnvAgentStateDir]) {
		t.Memory = &r.agentState
	}
	listener, err := r.sim.podNet.Listen(cfg.Listen)
	if err != nil {
		log.Error(err, "agent")
		return 1
	}
	cfg.Listener = listener
	exitCode, err := agent.Run(ctx, log, cfg, t)
	if err != nil && ctx.Err() == nil {
		log.Error(err, "agent failed")
	}
	return exitCode
}

// minimumGracePeriod is the least grace period the kubelet gives a
// container it stops, whatever the Pod asks.
const minimumGracePeriod = 2 * time.Second

// stopTime is how long stopping running containers takes: the node's
// ContainerStop, cut short by the grace period (at least
// minimumGracePeriod), after which the kubelet kills what still runs.
func (r *podRunner) stopTime(grace *int64) time.Duration {
	stop := r.sim.latency().ContainerStop
	if grace != nil {
		stop = min(stop, max(time.Duration(*grace)*time.Second, minimumGracePeriod))
	}
	return stop
}

func (r *podRunner) deleting() bool { return r.pod().DeletionTimestamp != nil }

// finishDeletion stops the containers, reports the Pod terminal (the Job
// controller counts and replaces only terminal Pods) and removes it, as the
// kubelet does once its grace period is over.
func (r *podRunner) finishDeletion(ctx context.Context) {
	r.status.close()
	if pod := r.pod(); pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		spend(ctx, r.stopTime(pod.DeletionGracePeriodSeconds))
		r.record(WorkersStopped, 0)
		st := newStatus(pod, r.ip, r.restarts, r.lastTerm, &r.initialized)
		st.sandboxReady = false
		for _, c := range pod.Spec.InitContainers {
			st.setInit(c.Name, terminated(137, "Error"))
		}
		for _, c := range pod.Spec.Containers {
			st.setMain(c.Name, terminated(137, "Error"))
		}
		st.phase = corev1.PodFailed
		if err := r.writeStatus(ctx, st.build(pod)); err != nil && ctx.Err() == nil {
			r.sim.opts.Log.Error(err, "reporting a deleted Pod terminal", "pod", r.namespace+"/"+r.name)
		}
	}
	err := r.sim.kubelet(r.nodeName).Pods(r.namespace).Delete(ctx, r.name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &r.uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		r.sim.opts.Log.Error(err, "finishing deletion", "pod", r.namespace+"/"+r.name)
	}
}

// fail marks the Pod failed, for a lost node.
func (r *podRunner) fail(ctx context.Context, reason, message string) {
	r.stop()
	r.status.close()
	pod, err := r.sim.kubelet(r.nodeName).Pods(r.namespace).Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return
	}
	pod.Status.Phase = corev1.PodFailed
	pod.Status.Reason, pod.Status.Message = reason, message
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByPodGC", Message: message, LastTransitionTime: metav1.Now(),
	})
	_, _ = r.sim.kubelet(r.nodeName).Pods(r.namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

// unconsumed returns a failure annotation that has not been acted on: once
// acted on, it counts as gone until a version of the Pod without it is seen
// (the Pod in hand may predate the annotation's removal).
func (r *podRunner) unconsumed(pod *corev1.Pod, key string) (string, bool) {
	v, ok := pod.Annotations[key]
	if !ok {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.consumed[key] {
		return "", false
	}
	r.consumed[key] = true
	return v, true
}

func (r *podRunner) clearAnnotation(ctx context.Context, key string) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: nil}}})
	_, _ = r.sim.kubelet(r.nodeName).Pods(r.namespace).Patch(ctx, r.name, types.MergePatchType, patch, metav1.PatchOptions{})
}

func findContainer(spec corev1.PodSpec, name string) (*corev1.Container, bool) {
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == name {
			return &spec.InitContainers[i], true
		}
	}
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i], false
		}
	}
	return nil, false
}

func reason(code int32) string {
	if code == 0 {
		return "Completed"
	}
	return "Error"
}

// record notes an event of this Pod, with the epoch its agent last reported.
func (r *podRunner) record(kind EventKind, exitCode int32) {
	rec := r.sim.opts.Recorder
	if rec == nil {
		return
	}
	r.mu.Lock()
	epoch := r.epoch
	r.mu.Unlock()
	rec.Record(Event{
		Time: time.Now(), Kind: kind, Namespace: r.namespace, Pod: r.name,
		ReplicatedJob: r.replicatedJob, Epoch: epoch, ExitCode: exitCode,
	})
}

// recordingTransport is the agent's own transport, noting each epoch it
// reports.
type recordingTransport struct {
	*agent.DirectTransport
	runner *podRunner
}

func (t *recordingTransport) ReportEpoch(ctx context.Context, epoch int32) error {
	return t.recorded(epoch, func() error { return t.DirectTransport.ReportEpoch(ctx, epoch) })
}

// ReportProcessEpoch is ReportEpoch in process scope.
func (t *recordingTransport) ReportProcessEpoch(ctx context.Context, epoch, workerRestarts int32) error {
	return t.recorded(epoch, func() error { return t.DirectTransport.ReportProcessEpoch(ctx, epoch, workerRestarts) })
}

func (t *recordingTransport) recorded(epoch int32, write func() error) error {
	t.runner.mu.Lock()
	t.runner.epoch = epoch
	t.runner.mu.Unlock()
	t.runner.record(EpochReported, 0)
	err := write()
	if err == nil {
		t.runner.record(EpochWritten, 0)
	}
	return err
}

// agentClientset returns the client the Pod's agent uses, and what closes
// its connections when the agent exits: the simulator's own client, or,
// with Options.AgentConfig, one that authenticates with a token bound to the
// Pod, as the token a kubelet projects into it. Each agent run gets its own
// connection, as a new agent process does: the handshake and the new watch
// after every in-place restart are part of what is measured.
func (r *podRunner) agentClientset(ctx context.Context) (kubernetes.Interface, func(), error) {
	if r.sim.opts.AgentConfig == nil {
		return r.sim.opts.Client, func() {}, nil
	}
	token, err := r.projectedToken(ctx, &r.agentToken, authenticationv1.TokenRequestSpec{})
	if err != nil {
		return nil, nil, err
	}
	cfg := agent.ClientConfig(rest.AnonymousClientConfig(r.sim.opts.AgentConfig))
	cfg.WrapTransport = r.sim.opts.AgentConfig.WrapTransport
	cfg.BearerToken = token
	cfg.QPS, cfg.Burst = 5, 10 // client-go's defaults, as in the agent binary
	// A dialer keeps client-go from sharing a cached transport (and its
	// connections) between agents: each config given one gets a transport
	// of its own. AgentConfig's, if it has one, counts the connections.
	cfg.Dial = r.sim.opts.AgentConfig.Dial
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, &http.Client{Transport: rt})
	if err != nil {
		return nil, nil, err
	}
	return cs, func() { utilnet.CloseIdleConnectionsFor(rt) }, nil
}

// reportTokenProjection is the service-account token the Pod's volumes
// project for an audience other than the API server's: the agent's, for
// its reports.
func reportTokenProjection(pod *corev1.Pod) (audience string, expiry int64, ok bool) {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if t := src.ServiceAccountToken; t != nil && t.Audience != "" {
				return t.Audience, ptr.Deref(t.ExpirationSeconds, 3600), true
			}
		}
	}
	return "", 0, false
}

// reportToken is the Pod's projected token for audience, as the kubelet
// projects the webhook's volume.
func (r *podRunner) reportToken(ctx context.Context, audience string, expiry int64) (string, error) {
	return r.projectedToken(ctx, &r.reportTok, authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &expiry})
}

// projectedToken is a token of the Pod's service account bound to the
// Pod, as spec asks (audiences, expiry), requested once per Pod and kept
// in *kept: the kubelet refreshes a token at 80 % of its life, longer
// than any simulated run. It is tried again until it succeeds, as the
// kubelet's token manager does before it starts the container: thousands
// of Pods starting at once get refusals and timeouts from a busy API
// server, which must not fail their agents.
func (r *podRunner) projectedToken(ctx context.Context, kept *string, spec authenticationv1.TokenRequestSpec) (string, error) {
	r.mu.Lock()
	token := *kept
	r.mu.Unlock()
	if token != "" {
		return token, nil
	}
	sa := r.pod().Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: r.name, UID: r.uid}
	var tr *authenticationv1.TokenRequest
	err := agent.Retry(ctx, func(ctx context.Context) error {
		var err error
		tr, err = r.sim.kubelet(r.nodeName).ServiceAccounts(r.namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			r.sim.opts.Log.V(1).Info("requesting a projected token failed; retrying", "pod", r.namespace+"/"+r.name, "audiences", spec.Audiences, "error", err)
		}
		return err
	}, nil)
	if err != nil {
		return "", fmt.Errorf("requesting a token bound to pod %s/%s: %w", r.namespace, r.name, err)
	}
	r.mu.Lock()
	*kept = tr.Status.Token
	r.mu.Unlock()
	return tr.Status.Token, nil
}

// mountsVolume reports whether container c mounts, at path, an emptyDir
// of the Pod: what the kubelet keeps across the container's restarts.
func mountsVolume(c *corev1.Container, pod *corev1.Pod, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return true
			}
		}
	}
	return false
}

// openConns are the connections one run of an agent opened.
type openConns struct {
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

// dial is dial, with each connection kept to be closed.
func (o *openConns) dial(dial func(context.Context, string, string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.closed {
			_ = c.Close()
			return nil, net.ErrClosed
		}
		o.conns = append(o.conns, c)
		return c, nil
	}
}

func (o *openConns) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	for _, c := range o.conns {
		_ = c.Close()
	}
	o.conns = nil
}
