package protocol

import "fmt"

// Direct reports: an agent tells the JobSet controller's leader its Pod's
// state over HTTPS instead of writing it on its Pod. The controller keeps
// reports in memory (they are soft state: an agent says its state again
// whenever the broadcast names a new ReportSession) and writes only the
// JobSet's status, once per transition. The Pod annotations stay the
// fallback of an agent that cannot reach the endpoint, and the path of
// upstream JobSet's agent.

// Keys of the broadcast ConfigMap's data that say where agents report.
// Absent, agents report on their Pod as before (an older manager, or
// direct reports turned off).
const (
	// KeyReportAddress is host:port of the leader's report endpoint.
	KeyReportAddress = "reportAddress"
	// KeyReportServerName is the name the endpoint's certificate is
	// issued for and checked against: the agent dials the leader's own
	// address, which the certificate does not name.
	KeyReportServerName = "reportServerName"
	// KeyReportCA is the PEM bundle of the CAs the endpoint's
	// certificate is checked against.
	KeyReportCA = "reportCA"
	// KeyReportSession changes with every term of a leader: an agent that
	// sees a new one says its state again, since the new leader knows
	// nothing of what the old one was told.
	KeyReportSession = "reportSession"
)

// AgentReportsAnnotation on a JobSet, set to AgentReportsPod, has its
// agents report on their Pods even where the controller serves direct
// reports: for a namespace whose NetworkPolicy keeps its Pods from the
// manager, which would otherwise cost each agent FallbackAfter before it
// writes its Pod.
const (
	AgentReportsAnnotation = "inplace.dev/agent-reports"
	AgentReportsPod        = "pod"
)

// ReportedMark marks, on the controller's in-memory copy of a Pod, that
// the Pod's agent reported to this leader: never written to the API
// server, it is how the controller's readers of a Pod tell an agent
// heard from this leader's term from one it has not heard from yet. It
// is not a valid annotation key (the space), so that no stored Pod, nor
// its template, can carry it and pass for reported.
const ReportedMark = "inplace.dev/reported-to-leader in memory"

// ReportEndpoint is where a JobSet's agents report, from its broadcast.
type ReportEndpoint struct {
	Address    string
	ServerName string
	CA         string
	Session    string
}

// IsZero reports whether the broadcast names no endpoint.
func (e ReportEndpoint) IsZero() bool { return e.Address == "" }

// ReportPath is the endpoint's path: an agent PUTs its Report there.
const ReportPath = "/v1alpha1/reports"

// BroadcastPath is the endpoint's stream of a JobSet's broadcast: an
// agent GETs it, with its token, and reads the broadcast ConfigMap's data
// as the leader's cache holds it (one JSON object per line), first as it
// stands, then at each change. An agent whose container restarted follows
// it instead of watching the ConfigMap: the restart then costs the API
// server no request per agent.
const BroadcastPath = "/v1alpha1/broadcast"

// ReportAudience is the default audience of the projected service-account
// token an agent presents: the controller accepts no token for another
// (the API server's own, say), and the API server none for this one.
const ReportAudience = "inplace.dev/agent-reports"

// The agent's environment for direct reports: the projected token's path
// (refreshed by the kubelet) and whether it may write its Pod. Without a
// token path, the agent reports on its Pod.
const (
	EnvReportTokenPath = "REPORT_TOKEN_PATH"
	// EnvReportPodFallback, "false", keeps the agent from writing its Pod
	// when the endpoint cannot be reached: its Role may not allow it.
	EnvReportPodFallback = "REPORT_POD_FALLBACK"
	// EnvAgentStateDir is the directory, on a volume of the Pod's life,
	// where the agent keeps the last report endpoint it was told: after
	// its container restarts it reads the broadcast from that endpoint
	// instead of the API server (AgentStateDir).
	EnvAgentStateDir = "AGENT_STATE_DIR"
	// AgentStateDir is where the webhook mounts the agent's state volume.
	AgentStateDir = "/var/run/inplace.dev/agent-state"
	// ReportTokenDir is where the webhook mounts the projected token.
	ReportTokenDir  = "/var/run/secrets/inplace.dev/reports"
	ReportTokenFile = "token"
)

// Report is the whole state an agent has to tell: each report replaces
// the one before, so that saying it again is always right.
type Report struct {
	// JobSet is the JobSet the agent reports for; the Pod must belong to
	// it.
	JobSet string `json:"jobSet"`
	// Epoch is the agent's epoch; 0 before it chose one.
	Epoch int32 `json:"epoch"`
	// WorkerRestarts counts the Pod's worker restarts in process scope.
	WorkerRestarts int32 `json:"workerRestarts,omitempty"`
	// WorkerExit is the last worker exit the agent saw (process scope).
	WorkerExit *WorkerExit `json:"workerExit,omitempty"`
	// ReadyEpoch is the epoch at which every supervised worker was ready.
	ReadyEpoch int32 `json:"readyEpoch,omitempty"`
}

// ReportAnswer is the endpoint's answer to a report.
type ReportAnswer struct {
	// Epoch is the epoch the controller holds for the Pod: higher than
	// the report's when the report was refused for being behind (409).
	Epoch int32 `json:"epoch"`
	// Reason says, in one word, why a report was refused
	// (ReasonTokenRefused, ...).
	Reason string `json:"reason,omitempty"`
	// Message says why a report was refused.
	Message string `json:"message,omitempty"`
}

// The reasons of a refusal an agent cannot cure by saying something else:
// the endpoint does not know it, or not yet. It falls back to its Pod as
// it would from an endpoint it cannot reach.
const (
	// ReasonUnauthenticated: no token.
	ReasonUnauthenticated = "unauthenticated"
	// ReasonTokenRefused: a token for another audience (the webhook and
	// the controller configured with different ones), expired, or not
	// bound to a Pod.
	ReasonTokenRefused = "token_refused"
	// ReasonPodGone: the leader's cache does not show the token's Pod, or
	// shows another of its name.
	ReasonPodGone = "pod_gone"
)

// Validate checks what a report says of itself.
func (r Report) Validate() error {
	switch {
	case r.JobSet == "":
		return fmt.Errorf("jobSet: required")
	case r.Epoch < 0:
		return fmt.Errorf("epoch: %d is negative", r.Epoch)
	case r.WorkerRestarts < 0:
		return fmt.Errorf("workerRestarts: %d is negative", r.WorkerRestarts)
	case r.ReadyEpoch < 0:
		return fmt.Errorf("readyEpoch: %d is negative", r.ReadyEpoch)
	case r.WorkerExit != nil && (r.WorkerExit.Container == "" || r.WorkerExit.Epoch <= 0 || r.WorkerExit.Code < 1 || r.WorkerExit.Code > 255):
		return fmt.Errorf("workerExit: want a container, a positive epoch and an exit code from 1 to 255")
	}
	return nil
}

// reportEndpointOf reads the endpoint of a broadcast ConfigMap's data.
func reportEndpointOf(data map[string]string) ReportEndpoint {
	return ReportEndpoint{
		Address: data[KeyReportAddress], ServerName: data[KeyReportServerName],
		CA: data[KeyReportCA], Session: data[KeyReportSession],
	}
}

// set writes the endpoint into a broadcast ConfigMap's data.
func (e ReportEndpoint) set(data map[string]string) {
	if e.IsZero() {
		return
	}
	data[KeyReportAddress] = e.Address
	data[KeyReportServerName] = e.ServerName
	data[KeyReportCA] = e.CA
	data[KeyReportSession] = e.Session
}
