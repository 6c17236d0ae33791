// Package simnode plays the kubelets of a local cluster: it registers Nodes
// and runs every Pod bound to them with kubelet semantics, without
// containers.
//
// A Pod's init containers run in order; a sidecar (restartPolicy Always)
// starts and, if it has a startup probe, is probed over HTTP at the Pod's IP
// before the next container starts. The agent sidecar of InPlaceRestart
// JobSets runs the real agent code in-process, serving its probes on the
// Pod's own address of an in-memory Pod network (podnet.go); it talks to
// the API server over a real connection of its own. Other containers are
// scripted: regular init containers succeed, main containers run until a
// test makes them exit. A container exit is handled by its
// restartPolicyRules (Restart, RestartAllContainers) and then its
// restartPolicy, as the kubelet does; the Pod's phase, conditions and
// container statuses are written as the kubelet writes them. The agent's
// environment is made at each start of its container from the node's copy
// of the Pod, Downward API references included (env.go), as the kubelet
// makes it: an agent restarted in place is given the epoch its Pod carries.
//
// Driving failures with kubectl alone:
//
//	sim.inplace.dev/exit-code: "C"   the first main container exits with C, once
//	sim.inplace.dev/crash: agent     the agent crashes (exit 1), once
//
// Where the simulation differs from a kubelet: no images, volumes, probes
// other than startup probes of sidecars, resource accounting or cgroups;
// unless Options.AgentConfig is set, the in-process agent uses the
// simulator's client instead of a token bound to its Pod; deletion is finished at once (no grace period).
//
// Test code: it may import any package of the module, and no package outside
// test/ and perf/ (the benchmarks) may import it.
package simnode
