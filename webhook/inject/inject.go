package inject

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/podfailure"
)

const (
	// OptOutAnnotation on a JobSet, set to "false", turns injection off for
	// it; the JobSet must then carry everything itself.
	OptOutAnnotation = "inplace.dev/inject"

	// InjectedAnnotation records what injection added, as a sorted,
	// comma-separated list of "<what>:<replicated job>[/<container>]".
	InjectedAnnotation = "inplace.dev/injected"

	// barrierHoldMillis is how long the agent holds a startup probe of its
	// barrier before answering that it has not lifted: just under the
	// probe's timeout (1 s), so a lift is seen within the probe that waits
	// for it and not a period later, and each failed probe still takes
	// about its period, keeping failureThreshold the barrier's timeout in
	// seconds.
	barrierHoldMillis = 900

	// MaxBackoffLimit is the backoffLimit InPlaceRestart needs: Pods restart
	// in place or are replaced, and the Job must never fail for that.
	MaxBackoffLimit = int32(1<<31 - 1)
)

// Decision is one thing injection did, for `inplacectl render` and the
// InjectedAnnotation.
type Decision struct {
	// What was added: "agent", "worker-restart-rules" or "job-settings".
	What string
	// Where: <replicated job> or <replicated job>/<container>.
	Where string
	// Why, in words.
	Why string
}

func (d Decision) key() string { return d.What + ":" + d.Where }

// Enabled reports whether injection applies to the JobSet.
func Enabled(js *jobset.JobSet) bool {
	return js.Spec.FailurePolicy != nil &&
		js.Spec.FailurePolicy.RestartStrategy == jobset.InPlaceRestart &&
		js.Annotations[OptOutAnnotation] != "false"
}

// Inject adds what InPlaceRestart needs to js and returns what it did. It
// does nothing to a JobSet for which Enabled is false.
func Inject(js *jobset.JobSet, agent configv1alpha1.Agent) []Decision {
	if !Enabled(js) {
		return nil
	}
	// With upstream JobSet's disable-in-place-restart annotation the Jobs
	// still get what InPlaceRestart needs of them, but no agent and no
	// restart rules: nothing restarts in place.
	_, disabled := js.Annotations[jobset.DisableInPlaceRestartKey]
	process, ordered := !disabled && protocol.ProcessScope(js.Annotations), jobset.StartsInOrder(js)
	park, standby := parkDeadline(js.Annotations), standbyOn(js.Annotations)
	var decisions []Decision
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		decisions = append(decisions, injectJob(rj, agent, !disabled)...)
		if process {
			decisions = append(decisions, injectProcessScope(rj, agent, ordered, park, standby)...)
		}
	}
	// The record covers this pass and every earlier one, so that a second
	// pass, which adds nothing, writes the same annotation.
	recorded := map[string]bool{}
	if prev := js.Annotations[InjectedAnnotation]; prev != "" {
		for _, k := range strings.Split(prev, ",") {
			recorded[k] = true
		}
	}
	for _, d := range decisions {
		recorded[d.key()] = true
	}
	if len(recorded) > 0 {
		keys := make([]string, 0, len(recorded))
		for k := range recorded {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if js.Annotations == nil {
			js.Annotations = map[string]string{}
		}
		js.Annotations[InjectedAnnotation] = strings.Join(keys, ",")
	}
	return decisions
}

func injectJob(rj *jobset.ReplicatedJob, agent configv1alpha1.Agent, inPlace bool) []Decision {
	var out []Decision
	job := &rj.Template.Spec
	var settings []string
	if job.BackoffLimit == nil {
		job.BackoffLimit = ptr.To(MaxBackoffLimit)
		settings = append(settings, "backoffLimit=2147483647")
	}
	if job.PodReplacementPolicy == nil {
		job.PodReplacementPolicy = ptr.To(batchv1.Failed)
		settings = append(settings, "podReplacementPolicy=Failed")
	}
	if job.Completions == nil && job.Parallelism != nil {
		job.Completions = ptr.To(*job.Parallelism)
		settings = append(settings, "completions=parallelism")
	}
	if len(settings) > 0 {
		out = append(out, Decision{"job-settings", rj.Name,
			"set " + strings.Join(settings, ", ") + ": Pods restart in place or are replaced; the Job must not fail for that"})
	}

	if !inPlace {
		return out
	}
	pod := &job.Template.Spec
	if !HasAgent(pod, agent.ContainerName) {
		pod.InitContainers = append(pod.InitContainers, agentContainer(agent))
		injectReportToken(pod, len(pod.InitContainers)-1, agent.Reports)
		out = append(out, Decision{"agent", rj.Name,
			fmt.Sprintf("added sidecar %s: holds the workers behind a barrier and restarts the Pod in place with exit code %d", agent.ContainerName, agent.RestartExitCode)})
	}

	for c := range pod.Containers {
		ctr := &pod.Containers[c]
		if len(ctr.RestartPolicyRules) > 0 {
			continue
		}
		rule, why := workerRule(ctr.Name, job.PodFailurePolicy)
		ctr.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
		if rule != nil {
			ctr.RestartPolicyRules = []corev1.ContainerRestartRule{*rule}
		}
		out = append(out, Decision{"worker-restart-rules", rj.Name + "/" + ctr.Name, why})
	}
	return out
}

// HasAgent reports whether the Pod already has an agent: the init container
// named like ours, any sidecar that restarts the whole Pod on an exit code
// (an agent the user wrote, as in the in-place restart KEP), or upstream
// JobSet's agent in either of its modes (a sidecar, or the main container
// that runs the worker itself), known by its name or its environment.
func HasAgent(pod *corev1.PodSpec, name string) bool {
	for _, c := range pod.InitContainers {
		if c.Name == name || upstreamAgent(c) {
			return true
		}
		if RestartsPod(c) {
			return true
		}
	}
	return slices.ContainsFunc(pod.Containers, func(c corev1.Container) bool {
		return upstreamAgent(c) && len(c.RestartPolicyRules) > 0
	})
}

// RestartsPod reports whether an init container is a sidecar that
// restarts all of its Pod's containers on an exit code: an agent, ours or
// one the user wrote.
func RestartsPod(c corev1.Container) bool {
	return ptr.Deref(c.RestartPolicy, "") == corev1.ContainerRestartPolicyAlways &&
		slices.ContainsFunc(c.RestartPolicyRules, func(r corev1.ContainerRestartRule) bool {
			return r.Action == corev1.ContainerRestartRuleActionRestartAllContainers
		})
}

// upstreamAgent reports whether c is upstream JobSet's agent.
func upstreamAgent(c corev1.Container) bool {
	return protocol.IsUpstreamAgent(c.Name, func(yield func(string) bool) {
		for _, e := range c.Env {
			if !yield(e.Name) {
				return
			}
		}
	})
}

func agentContainer(a configv1alpha1.Agent) corev1.Container {
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	port := intstr.FromInt32(a.BarrierPort)
	return corev1.Container{
		Name:          a.ContainerName,
		Image:         a.Image,
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		RestartPolicyRules: []corev1.ContainerRestartRule{{
			Action: corev1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{
				Operator: corev1.ContainerRestartRuleOnExitCodesOpIn,
				Values:   []int32{a.RestartExitCode},
			},
		}},
		Ports: []corev1.ContainerPort{{Name: "barrier", ContainerPort: a.BarrierPort, Protocol: corev1.ProtocolTCP}},
		Env: []corev1.EnvVar{
			fieldEnv(protocol.EnvNamespace, "metadata.namespace"),
			fieldEnv(protocol.EnvPodName, "metadata.name"),
			fieldEnv(protocol.EnvPodUID, "metadata.uid"),
			fieldEnv(protocol.EnvPodIP, "status.podIP"),
			fieldEnv(protocol.EnvJobSetName, "metadata.annotations['"+jobset.JobSetNameKey+"']"),
			fieldEnv(protocol.EnvReplicatedJobName, "metadata.annotations['"+jobset.ReplicatedJobNameKey+"']"),
			// Evaluated by the kubelet at every start of the container:
			// an agent restarted in place knows its Pod's epoch without a
			// read of its Pod.
			fieldEnv(protocol.EnvPodEpoch, "metadata.annotations['"+jobset.EpochKey+"']"),
			{Name: protocol.EnvRestartExitCode, Value: fmt.Sprint(a.RestartExitCode)},
			{Name: protocol.EnvBarrierPort, Value: fmt.Sprint(a.BarrierPort)},
			{Name: protocol.EnvBarrierHold, Value: fmt.Sprint(barrierHoldMillis)},
		},
		// The barrier: containers after a sidecar start only once its
		// startup probe succeeds, which the agent allows once its epoch is
		// synced.
		// The agent holds each probe up to barrierHoldMillis and answers
		// the moment the barrier lifts.
		StartupProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: protocol.BarrierPath, Port: port}},
			PeriodSeconds:    1,
			TimeoutSeconds:   1,
			FailureThreshold: a.BarrierTimeoutSeconds,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: protocol.HealthPath, Port: port}},
			PeriodSeconds:    10,
			FailureThreshold: 3,
		},
		Resources:       *a.Resources.DeepCopy(),
		SecurityContext: agentSecurityContext(),
	}
}

// workerRule is the restart rule of a worker container: restart the whole
// Pod in place on any non-zero exit code, except the codes that the Job's
// podFailurePolicy turns into a Job failure (those must fail the Pod, so
// that the Job fails and the JobSet's failure policy decides).
func workerRule(container string, pfp *batchv1.PodFailurePolicy) (*corev1.ContainerRestartRule, string) {
	codes := podfailure.ExitCodes(container, pfp)
	fatal := codes.Fatal
	if codes.OthersFatal {
		// The policy fails the Job on every code but a few: restart in place
		// only on those few.
		restart := codes.NonFatal
		if len(restart) == 0 {
			return nil, "restartPolicy Never and no restart rule: the podFailurePolicy fails the Job on every non-zero exit code"
		}
		return &corev1.ContainerRestartRule{
			Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: restart},
		}, fmt.Sprintf("restart the Pod in place on exit codes %v; every other exit fails the Pod (podFailurePolicy FailJob)", restart)
	}
	notIn := append([]int32{0}, fatal...)
	why := "restart the Pod in place on any non-zero exit code"
	if len(fatal) > 0 {
		why += fmt.Sprintf(", except %v, which fail the Pod so that the podFailurePolicy fails the Job", fatal)
	}
	return &corev1.ContainerRestartRule{
		Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: notIn},
	}, why
}
