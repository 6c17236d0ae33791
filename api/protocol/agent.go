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
