package inject

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

// supervisorVolume is the volume that carries the supervisor's binary to
// the worker containers: an emptyDir the agent's container fills, or an
// image volume of the agent's image (agent.supervisorVolume).
const supervisorVolume = "inplace-supervisor"

// injectProcessScope runs every worker container of the Pod under the
// supervisor and tells the agent so. It needs the agent injection adds:
// with an agent of the user's own (or upstream JobSet's) the workers are
// left as they are, and the built-in policy refuses the JobSet, saying
// why. So are they all when one has no command, which is refused too: the
// image's entrypoint is not visible to admission.
//
// In in-process scope (park > 0) the supervisor asks the worker to park at
// a new epoch, and stops it only if it has not within park.
func injectProcessScope(rj *jobset.ReplicatedJob, agent configv1alpha1.Agent, ordered bool, park time.Duration, standby bool) []Decision {
	pod := &rj.Template.Spec.Template.Spec
	a := slices.IndexFunc(pod.InitContainers, func(c corev1.Container) bool {
		return c.Name == agent.ContainerName && InjectedAgent(c)
	})
	if a < 0 {
		return nil
	}
	// All or nothing: a worker that could not be wrapped would start
	// without a barrier once the agent's startup probe is gone. The
	// built-in policy refuses such a JobSet, saying which container.
	for _, c := range pod.Containers {
		if len(c.Command) == 0 {
			return nil
		}
	}
	var out []Decision
	grace := 30 * time.Second
	if pod.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	}
	// A template injected before keeps its volume, whatever the
	// configuration says now: its workers' mounts and its agent's hook
	// were made for that one.
	vol := supervisorVolumeOf(agent, pod.InitContainers[a])
	if i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == supervisorVolume }); i >= 0 {
		vol = pod.Volumes[i]
	}
	var supervised []string
	for i := range pod.Containers {
		ctr := &pod.Containers[i]
		if protocol.IsSupervised(ctr.Command) {
			supervised = append(supervised, ctr.Name)
			continue
		}
		if len(ctr.Command) == 0 {
			continue
		}
		flags := []string{protocol.SupervisorBinary, protocol.SupervisorCommand,
			"--agent=127.0.0.1:" + strconv.Itoa(int(agent.BarrierPort)),
			"--container=" + ctr.Name,
			"--restart-exit-codes=" + restartCodes(ctr.RestartPolicyRules),
			"--grace-period=" + grace.String()}
		if park > 0 {
			flags = append(flags, "--park-deadline="+park.String())
			if standby {
				// A standby of each worker, started ahead, takes the
				// place of one that fails.
				flags = append(flags, "--standby")
			}
		}
		if ordered {
			// The barriers lift in order of readiness, and a Pod's Ready
			// condition outlives a restart of its workers: the supervisor
			// runs the probe at each epoch and says so.
			probe, _ := json.Marshal(readinessOf(*ctr))
			// The kubelet expands $(VAR) in a command: the probe's own
			// text must reach the supervisor as written.
			flags = append(flags, "--readiness="+strings.ReplaceAll(string(probe), "$", "$$"))
		}
		ctr.Command = append(append(flags, "--"), append(ctr.Command, ctr.Args...)...)
		ctr.Args = nil
		ctr.VolumeMounts = append(ctr.VolumeMounts, supervisorMount(vol))
		supervised = append(supervised, ctr.Name)
		why := "runs the command under the supervisor, which restarts the worker's processes in place when the epoch changes"
		if park > 0 {
			why = "runs the command under the supervisor, which asks the worker to park and resume in its process when the epoch changes (within " + park.String() + ", or restarts it)"
		}
		out = append(out, Decision{"supervisor", rj.Name + "/" + ctr.Name, why})
	}
	if len(out) == 0 {
		return nil
	}
	ag := &pod.InitContainers[a]
	// The supervisors are the barrier: the workers' containers start at
	// once and their supervisors hold the workers, so no probe period
	// stands between the lift and the workers.
	ag.StartupProbe = nil
	if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == supervisorVolume }) {
		pod.Volumes = append(pod.Volumes, vol)
	}
	if vol.Image == nil {
		installSupervisor(ag)
	}
	setEnv(ag, corev1.EnvVar{Name: protocol.EnvRestartScope, Value: protocol.RestartScopeProcess})
	setEnv(ag, corev1.EnvVar{Name: protocol.EnvSupervisedContainers, Value: strings.Join(supervised, ",")})
	setEnv(ag, corev1.EnvVar{Name: protocol.EnvWorkerRestarts, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: "metadata.annotations['" + protocol.WorkerRestartsAnnotation + "']"}}})
	return out
}

// supervisorVolumeOf is the volume that carries the supervisor's binary to
// the workers: an emptyDir the agent's postStart hook fills
// (installSupervisor), or the agent's image itself, which the container
// runtime mounts read-only with no copy and no hook. With the hook the
// kubelet starts the workers' containers only once the copy, an exec in
// the agent's container, has ended: 0.40 s per Pod at 16 Pods on 4 nodes
// (docs/explanation/performance.md, "First start").
func supervisorVolumeOf(agent configv1alpha1.Agent, ag corev1.Container) corev1.Volume {
	v := corev1.Volume{Name: supervisorVolume}
	if agent.SupervisorVolume == configv1alpha1.SupervisorVolumeImage {
		// The agent container's own image and pull policy: the
		// supervisor comes from the image the agent runs. A policy left
		// empty is defaulted by the API server as the container's is:
		// Always for a :latest image, IfNotPresent otherwise.
		v.Image = &corev1.ImageVolumeSource{Reference: ag.Image, PullPolicy: ag.ImagePullPolicy}
	} else {
		v.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	return v
}

// supervisorMount mounts the supervisor's volume in a worker container,
// read-only, so that protocol.SupervisorBinary is the binary: of an image
// volume only the directory of protocol.ImageSupervisorBinary.
func supervisorMount(vol corev1.Volume) corev1.VolumeMount {
	m := corev1.VolumeMount{Name: supervisorVolume, MountPath: protocol.SupervisorDir, ReadOnly: true}
	if vol.Image != nil {
		m.SubPath = strings.TrimPrefix(path.Dir(protocol.ImageSupervisorBinary), "/")
	}
	return m
}

// installSupervisor has the agent's container put the supervisor on the
// emptyDir before any worker's container starts: the kubelet runs a
// sidecar's postStart hook to its end before it starts the next
// container. A hook rather than an init container of its own: each
// container the kubelet starts one after the other waits for its next
// look at the node's containers.
func installSupervisor(ag *corev1.Container) {
	if !slices.ContainsFunc(ag.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == supervisorVolume }) {
		ag.VolumeMounts = append(ag.VolumeMounts, corev1.VolumeMount{Name: supervisorVolume, MountPath: protocol.SupervisorDir})
	}
	if ag.Lifecycle == nil {
		ag.Lifecycle = &corev1.Lifecycle{}
	}
	ag.Lifecycle.PostStart = &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
		Command: []string{protocol.ImageSupervisorBinary, protocol.InstallCommand, protocol.SupervisorBinary}}}
}

// parkDeadline is the deadline to park in in-process scope, 0 otherwise:
// the JobSet's ParkDeadlineAnnotation, which the built-in policy checks,
// or the default.
func parkDeadline(annotations map[string]string) time.Duration {
	if !protocol.InProcessScope(annotations) {
		return 0
	}
	if d, err := time.ParseDuration(annotations[protocol.ParkDeadlineAnnotation]); err == nil && d > 0 {
		// Held to the policy's bounds, should the policy be off.
		return min(max(d, protocol.MinParkDeadline), protocol.MaxParkDeadline)
	}
	return protocol.DefaultParkDeadline
}

// standbyOn reports whether an in-process JobSet asks for standbys.
func standbyOn(annotations map[string]string) bool {
	return protocol.InProcessScope(annotations) && annotations[protocol.StandbyAnnotation] == "true"
}

// readinessOf is a container's readiness probe as the supervisor runs it:
// a probe with no handler it can run (none, or gRPC) is passed once the
// worker has started.
func readinessOf(c corev1.Container) protocol.ReadinessProbe {
	var out protocol.ReadinessProbe
	p := c.ReadinessProbe
	if p == nil {
		return out
	}
	out.InitialDelaySeconds, out.PeriodSeconds, out.TimeoutSeconds = int(p.InitialDelaySeconds), int(p.PeriodSeconds), int(p.TimeoutSeconds)
	port := func(v intstr.IntOrString) int {
		if v.Type == intstr.Int {
			return v.IntValue()
		}
		for _, cp := range c.Ports {
			if cp.Name == v.StrVal {
				return int(cp.ContainerPort)
			}
		}
		return 0
	}
	switch {
	case p.Exec != nil:
		out.Exec = p.Exec.Command
	case p.HTTPGet != nil:
		out.HTTPGet = &protocol.HTTPGetProbe{Port: port(p.HTTPGet.Port), Path: p.HTTPGet.Path, Scheme: string(p.HTTPGet.Scheme)}
	case p.TCPSocket != nil:
		out.TCPPort = port(p.TCPSocket.Port)
	}
	return out
}

// restartCodes is the supervisor's --restart-exit-codes: the codes the
// worker's own restart rule restarts in place, "In:" (none) without one.
func restartCodes(rules []corev1.ContainerRestartRule) string {
	for _, r := range rules {
		if r.Action != corev1.ContainerRestartRuleActionRestartAllContainers && r.Action != corev1.ContainerRestartRuleActionRestart {
			continue
		}
		if r.ExitCodes == nil {
			return "NotIn:0"
		}
		vals := make([]string, len(r.ExitCodes.Values))
		for i, v := range r.ExitCodes.Values {
			vals[i] = fmt.Sprint(v)
		}
		return string(r.ExitCodes.Operator) + ":" + strings.Join(vals, ",")
	}
	return "In:"
}

// InjectedAgent reports whether c is the agent injection adds: the
// sidecar whose environment carries the restart exit code.
func InjectedAgent(c corev1.Container) bool {
	return slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == protocol.EnvRestartExitCode })
}

// setEnv adds e to c unless c already sets it: injection runs again on
// its own output.
func setEnv(c *corev1.Container, e corev1.EnvVar) {
	if !slices.ContainsFunc(c.Env, func(have corev1.EnvVar) bool { return have.Name == e.Name }) {
		c.Env = append(c.Env, e)
	}
}

func agentSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}
