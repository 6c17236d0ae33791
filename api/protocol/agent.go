package protocol

import "iter"

// The agent's environment: the mutating webhook sets these variables on the
// agent container it injects, and the agent reads them. Changing a name
// breaks agents injected by an older manager.
const (
	EnvNamespace         = "NAMESPACE"
	EnvPodName           = "POD_NAME"
	EnvPodUID            = "POD_UID"
	EnvPodIP             = "POD_IP"
	EnvJobSetName        = "JOBSET_NAME"
	EnvReplicatedJobName = "REPLICATED_JOB_NAME"
	EnvRestartExitCode   = "RESTART_POD_IN_PLACE_EXIT_CODE"
	EnvBarrierPort       = "BARRIER_PORT"
	// EnvBarrierHold is optional: agents injected by older managers do not
	// hold probes.
	EnvBarrierHold = "BARRIER_HOLD_MILLISECONDS"
	// EnvPodEpoch is the Pod's epoch annotation (jobset.sigs.k8s.io/epoch)
	// through the Downward API: the kubelet reads it from its copy of the
	// Pod each time it starts the agent's container, so an agent restarted
	// in place learns its Pod's epoch without asking the API server. Empty
	// when the Pod has no epoch yet; optional: agents injected by older
	// managers read their Pod instead.
	EnvPodEpoch = "POD_EPOCH"
)

// The agent's HTTP endpoints: the injected startupProbe asks BarrierPath
// (it succeeds once the barrier has lifted, which is what holds the workers)
// and the livenessProbe asks HealthPath.
const (
	BarrierPath = "/barrier-is-lifted"
	HealthPath  = "/healthz"
)

// UpstreamAgentName is the container name upstream JobSet's examples give
// its in-place restart agent.
const UpstreamAgentName = "in-place-restart-agent"

// Upstream JobSet's agent's environment: the variables only it reads.
const (
	UpstreamEnvExitCode      = "IN_PLACE_RESTART_EXIT_CODE"
	UpstreamEnvWorkerCommand = "WORKER_COMMAND"
	UpstreamEnvProbePath     = "STARTUP_PROBE_PATH"
	UpstreamEnvProbePort     = "STARTUP_PROBE_PORT"
)

// IsUpstreamAgent reports whether a container of the name, whose
// environment sets the variables env yields, is upstream JobSet's in-place
// restart agent: it reads JOBSET_NAME and POD_NAME, and is known by
// upstream's name or by a variable only it reads. It allocates nothing:
// the controller asks it of every Pod it reads.
func IsUpstreamAgent(name string, env iter.Seq[string]) bool {
	var jobSet, pod, onlyUpstream bool
	for e := range env {
		switch e {
		case EnvJobSetName:
			jobSet = true
		case EnvPodName:
			pod = true
		case UpstreamEnvExitCode, UpstreamEnvWorkerCommand, UpstreamEnvProbePath, UpstreamEnvProbePort:
			onlyUpstream = true
		}
	}
	return jobSet && pod && (onlyUpstream || name == UpstreamAgentName)
}
