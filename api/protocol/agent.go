package protocol

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

// IsUpstreamAgent reports whether a container of the name, whose
// environment sets the variables env names, is upstream JobSet's in-place
// restart agent: it reads JOBSET_NAME and POD_NAME, and is known by
// upstream's name or by a variable only it reads.
func IsUpstreamAgent(name string, env []string) bool {
	set := map[string]bool{}
	for _, e := range env {
		set[e] = true
	}
	if !set[EnvJobSetName] || !set[EnvPodName] {
		return false
	}
	return name == UpstreamAgentName || set["IN_PLACE_RESTART_EXIT_CODE"] || set["WORKER_COMMAND"] ||
		set["STARTUP_PROBE_PATH"] || set["STARTUP_PROBE_PORT"]
}
