// Package agent is the per-Pod sidecar of the in-place restart protocol.
//
// Its protocol is a pure state machine (Machine) fed with the JobSet's
// broadcast (the deprecated and synced epochs and which replicated jobs may
// lift their barrier) behind a small Transport; today's transport is the
// API server (kube.go), and another can be measured against it.
//
//	           start
//	             │ epoch := synced+1, reported on the Pod
//	             │ (or the Pod's epoch, resumed, when only the agent
//	             │  restarted and the workers still run)
//	             ▼
//	    ┌──── waiting ────┐  epoch == synced and my replicated job's
//	    │                 │  turn has come: lift the barrier
//	    │                 ▼
//	    │              lifted (workers run)
//	    │                 │
//	    └──────┬──────────┘
//	           │ epoch <= deprecated
//	           ▼
//	exit RESTART_POD_IN_PLACE_EXIT_CODE: the kubelet restarts every
//	container of the Pod (RestartAllContainers) and the agent starts over
//
// In process scope (process.go) the agent does not exit at a deprecated
// epoch: it moves to synced+1, its Pod's supervisors (agent/supervisor)
// stop their workers, and once they all have it reports the new epoch and
// waits as above; the supervisors start the workers when it lifts. A
// worker's exit that restarts in place reaches it from its supervisor, and
// it writes the exit on its Pod for the controller.
//
// Imports: api/ (the JobSet's keys and the protocol's wire format) and
// client-go. It never imports the controller, the webhook, the policy engine
// (OPA) or controller-runtime: the agent runs in every Pod of every
// InPlaceRestart JobSet and stays small.
package agent
