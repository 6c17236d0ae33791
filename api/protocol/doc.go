// Package protocol is the wire contract of the in-place restart protocol
// between its three parties: the controller, the mutating webhook that
// injects the agent, and the agent in every Pod. Both sides of each
// exchange import it, so that a name cannot drift between them; changing
// any of it breaks agents injected by an older manager.
//
//	broadcast.go  the per-JobSet broadcast: a ConfigMap named <jobset>-epochs,
//	              owned by the JobSet, holding the deprecated and synced epochs
//	              and which replicated jobs may lift their barrier. Agents
//	              watch this object, a few hundred bytes, instead of the
//	              JobSet, which with its Pod templates is tens of kilobytes:
//	              every update is fanned out to every agent.
//	agent.go      the agent's environment variables and HTTP endpoints, as
//	              the webhook writes them into the Pod and the agent reads them.
//	epoch.go      the epoch (Epoch): its one conversion to and from upstream
//	              JobSet's in-place restart attempt, its one writer and parser
//	              as text, and the kubelet's reason for an in-place restart of
//	              every container, which the controller and the agents both read.
//
// The Pod side of the protocol (the epoch annotation and the JobSet's keys)
// is in api/jobset/v1alpha2 with the other reserved keys.
//
// Imports: the standard library only.
package protocol
