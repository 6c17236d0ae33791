package protocol

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Process scope: a JobSet annotated RestartScopeAnnotation: process has each
// worker run under a supervisor inside its own container, and the agent
// restarts the workers' processes instead of having the kubelet restart
// every container of the Pod. This file is the contract between the
// webhook, which wraps the workers' commands, the supervisor, the agent and
// the controller.

// RestartScopeAnnotation on a JobSet chooses what an in-place restart
// restarts: RestartScopeContainer (the default), RestartScopeProcess or
// RestartScopeInProcess.
const RestartScopeAnnotation = "inplace.dev/restart-scope"

// The values of RestartScopeAnnotation.
const (
	// RestartScopeContainer: the agent exits with the restart exit code and
	// the kubelet restarts every container of the Pod (RestartAllContainers).
	RestartScopeContainer = "container"
	// RestartScopeProcess: the supervisors stop and start the workers'
	// process groups; no container restarts.
	RestartScopeProcess = "process"
	// RestartScopeInProcess: process scope, but a worker that speaks the
	// worker protocol (inprocess.go) is not stopped: it is told that its epoch
	// is over, leaves its step, and runs on at the next epoch in the same
	// process. A worker that does not answer in time is stopped as in
	// process scope.
	RestartScopeInProcess = "in-process"
)

// RestartScopes lists the values RestartScopeAnnotation accepts.
var RestartScopes = []string{RestartScopeContainer, RestartScopeProcess, RestartScopeInProcess}

// The agent's environment in process scope.
const (
	// EnvRestartScope is RestartScopeProcess in process scope; unset (or
	// RestartScopeContainer) otherwise.
	EnvRestartScope = "RESTART_SCOPE"
	// EnvSupervisedContainers is the comma-separated names of the worker
	// containers whose supervisors the agent waits for before it reports a
	// new epoch.
	EnvSupervisedContainers = "SUPERVISED_CONTAINERS"
	// EnvWorkerRestarts is the Pod's WorkerRestartsAnnotation through the
	// Downward API: an agent that restarts keeps counting from it.
	EnvWorkerRestarts = "WORKER_RESTARTS"
	// EnvWorkerEpoch is set by the supervisor on the worker it starts: the
	// epoch whose barrier let it through.
	EnvWorkerEpoch = "INPLACE_EPOCH"
)

// The supervisor's files: the agent container's postStart hook runs the
// supervisor's binary of the agent's image (ImageSupervisorBinary), which
// copies itself to SupervisorBinary on an emptyDir mounted at SupervisorDir
// in the agent's and every worker container; or, with an image volume of
// the agent's image, the workers mount the directory of
// ImageSupervisorBinary at SupervisorDir. A worker's command then starts
// with SupervisorBinary and SupervisorCommand. A binary of its own,
// not the agent's: a few megabytes with no Kubernetes client, copied into
// every Pod at its start.
const (
	ImageSupervisorBinary = "/usr/local/bin/inplace-supervisor"
	SupervisorDir         = "/inplace-supervisor"
	SupervisorBinary      = SupervisorDir + "/inplace-supervisor"
	SupervisorCommand     = "supervise"
	// InstallCommand is the supervisor's command that copies itself.
	InstallCommand = "install"
)

// The agent's endpoints for the supervisors of its Pod, on the barrier's
// port (supervisors reach it on localhost: a Pod's containers share its
// network).
const (
	// SupervisorStatePath answers the supervisor's long poll with the
	// agent's SupervisorState once it is newer than the query's "after"
	// version (or after a while, unchanged). The query's "container" and
	// "running" say which container asks and which epoch its worker runs
	// (0: none).
	SupervisorStatePath = "/supervisor/state"
	// SupervisorStartPath asks leave to start the worker at the query's
	// "epoch": 200 if that epoch's barrier is lifted, 409 otherwise.
	SupervisorStartPath = "/supervisor/start"
	// SupervisorExitPath reports that the worker of the query's "epoch"
	// exited with the query's "code", a code that restarts in place.
	SupervisorExitPath = "/supervisor/exit"
	// SupervisorReadyPath reports that the worker of the query's "epoch"
	// passed its readiness probe, as the supervisor ran it.
	SupervisorReadyPath = "/supervisor/ready"
)

// ReadinessProbe is a worker container's readiness probe as the supervisor
// runs it (its --readiness flag, in JSON) in a JobSet whose barriers lift
// in order: a Pod's Ready condition survives a process restart, so the
// order is kept by the supervisors' own verdict at the new epoch. With no
// handler the worker is ready once started.
type ReadinessProbe struct {
	Exec []string `json:"exec,omitempty"`
	// HTTPGet: a GET of http(s)://127.0.0.1:<port><path> below 400.
	HTTPGet *HTTPGetProbe `json:"httpGet,omitempty"`
	// TCPPort: a connection to 127.0.0.1:<port>.
	TCPPort             int `json:"tcpPort,omitempty"`
	InitialDelaySeconds int `json:"initialDelaySeconds,omitempty"`
	PeriodSeconds       int `json:"periodSeconds,omitempty"`
	TimeoutSeconds      int `json:"timeoutSeconds,omitempty"`
}

// HTTPGetProbe is a ReadinessProbe's GET.
type HTTPGetProbe struct {
	Port   int    `json:"port"`
	Path   string `json:"path,omitempty"`
	Scheme string `json:"scheme,omitempty"`
}

// SupervisorState is what the agent tells the supervisors.
type SupervisorState struct {
	// Version rises with every change.
	Version uint64 `json:"version"`
	// Epoch is the agent's epoch: a worker running at another one must
	// stop.
	Epoch int32 `json:"epoch"`
	// Lifted: the barrier of Epoch is lifted; a worker that has not run at
	// Epoch may start.
	Lifted bool `json:"lifted"`
}

// The Pod annotations the agent writes in process scope, beside the epoch.
const (
	// WorkerExitAnnotation says that a worker exited with a code that
	// restarts in place, as FormatWorkerExit writes it. The controller reads
	// it as it reads a terminated worker container: while the Pod's epoch
	// is the one the worker ran at, the worker has exited.
	WorkerExitAnnotation = "inplace.dev/worker-exit"
	// WorkerRestartsAnnotation counts the restarts of the Pod's workers in
	// process scope, where the containers' restartCount does not move.
	WorkerRestartsAnnotation = "inplace.dev/worker-restarts"
	// ReadyEpochAnnotation is the last epoch at which every supervised
	// worker of the Pod passed its readiness probe, in a JobSet whose
	// barriers lift in order. The controller counts a Pod ready at an
	// epoch only with it, in process scope.
	ReadyEpochAnnotation = "inplace.dev/ready-epoch"
)

// WorkerExit is a worker's exit in process scope.
type WorkerExit struct {
	Epoch     int32  `json:"epoch"`
	Container string `json:"container"`
	Code      int    `json:"code"`
}

// FormatWorkerExit is WorkerExitAnnotation's value: "<epoch>:<container>:<code>".
func FormatWorkerExit(e WorkerExit) string {
	return fmt.Sprintf("%s:%s:%d", Epoch(e.Epoch), e.Container, e.Code)
}

// ParseWorkerExit parses WorkerExitAnnotation's value.
func ParseWorkerExit(value string) (WorkerExit, error) {
	parts := strings.Split(value, ":")
	if len(parts) != 3 || parts[1] == "" {
		return WorkerExit{}, errNotWorkerExit
	}
	epoch, err := ParseEpoch(parts[0])
	if err != nil || epoch == 0 {
		return WorkerExit{}, errNotWorkerExit
	}
	code, err := strconv.Atoi(parts[2])
	if err != nil || code < 0 || code > 255 {
		return WorkerExit{}, errNotWorkerExit
	}
	return WorkerExit{Epoch: int32(epoch), Container: parts[1], Code: code}, nil
}

var errNotWorkerExit = errors.New(`not "<epoch>:<container>:<exit code>"`)

// ProcessScope reports whether a JobSet with these annotations runs its
// workers under the supervisor: in process or in-process scope, which
// the agent and the controller treat alike.
func ProcessScope(annotations map[string]string) bool {
	scope := annotations[RestartScopeAnnotation]
	return scope == RestartScopeProcess || scope == RestartScopeInProcess
}

// InProcessScope reports whether a JobSet with these annotations restarts
// its workers in-process.
func InProcessScope(annotations map[string]string) bool {
	return annotations[RestartScopeAnnotation] == RestartScopeInProcess
}

// IsSupervised reports whether a container's command runs it under the
// supervisor, as the webhook writes it.
func IsSupervised(command []string) bool {
	return len(command) > 1 && command[0] == SupervisorBinary && command[1] == SupervisorCommand
}
