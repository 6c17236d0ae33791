// Package supervisor runs a worker inside its own container in process
// scope (inplace.dev/restart-scope: process): it is the container's first
// process, and the webhook rewrites the worker container's command to start
// it with the original command after "--".
//
//	start ──▶ waiting ── the agent's barrier of epoch e lifts ──▶ running(e)
//	             ▲                                                 │  │
//	             │        the agent moves to epoch e' != e:        │  │
//	             └──── SIGTERM to the worker's process group, ◀────┘  │
//	                   SIGKILL after the grace period                 │
//	             ▲                                                    │
//	             └── exit with a code that restarts in place: ◀───────┘
//	                 reported to the agent
//	  exit 0, or a code the Job's podFailurePolicy decides: the container
//	  ends with it, and the kubelet and the Job judge it as in container scope
//
// In in-process scope (--park-deadline) a worker connected to the control
// socket is not stopped at a new epoch: it is asked to park (control.go,
// api/protocol/inprocess.go), and runs again in its process behind the
// next barrier; one that does not park within the deadline, or has no
// connection, is stopped as above. With --standby a second process of the
// command waits on the socket to take the place of a worker that exits
// (standby.go).
//
//	running(e) ── new epoch ──▶ parking(e) ── "parked e" ──▶ parked
//	    ▲                           │ deadline                  │
//	    │                           ▼                           │
//	    │                    stopping (SIGTERM)                 │
//	    └──────── the barrier of e' lifts: "start e'" ◀─────────┘
//
// It reaps every process of its container (PID 1's duty, or a child
// subreaper's when it is not PID 1), forwards signals to the worker's
// process group, and starts the worker at most once per epoch. It asks the
// agent over the Pod's loopback and needs nothing else: no API server, no
// container runtime socket, no privilege.
//
// Imports: the standard library and api/protocol only: it runs in the
// user's container.
package supervisor
