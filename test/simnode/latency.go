package simnode

import (
	"context"
	"time"
)

// Latency is the node-side time the simulated kubelets spend, which a real
// node spends in its container runtime, network plugin and processes. The
// zero value (every delay 0) leaves only the control plane's own cost: what
// the tests use, and what the benchmark's "zero" profile shows.
type Latency struct {
	// PodStart: creating a new Pod's sandbox and network, before its first
	// container (not spent on an in-place restart, which keeps both).
	PodStart time.Duration
	// ImagePull: pulling a new Pod's images; on an in-place restart they
	// are present.
	ImagePull time.Duration
	// ContainerStart: starting the containers of one step (one sidecar, or
	// the main containers).
	ContainerStart time.Duration
	// ContainerStop: stopping a Pod's running containers, for an in-place
	// restart of all of them, a deletion, or the sidecars still running
	// once the workers of a Pod that does not restart have exited: the
	// containers' handling of SIGTERM, bounded by the grace period, as in
	// a real node.
	ContainerStop time.Duration
	// ProcessStart: a supervisor's start of its worker in process scope,
	// a fork and exec in a running container.
	ProcessStart time.Duration
	// ProcessStop: a worker's exit on the supervisor's SIGTERM in process
	// scope: the same handling of the signal as ContainerStop's.
	ProcessStop time.Duration
}

// RealisticLatency is a node profile for large training Pods, with images
// already on the node. Its sources:
//
//   - PodStart 1.5 s: Kubernetes' pod startup SLO allows 5 s at the 99th
//     percentile for stateless Pods, image pulls excluded, measured from
//     creation and so including scheduling and the API (kubernetes/community,
//     sig-scalability/slos/pod_startup_latency.md); sandbox creation and CNI
//     setup are the largest node-side part, commonly 1–2 s.
//   - ImagePull 0: training images are several GB and are pre-pulled on
//     accelerator nodes; a pull that is not costs minutes and would dwarf
//     everything else.
//   - ContainerStart 0.3 s: a container start through containerd and runc,
//     hundreds of milliseconds.
//   - ContainerStop 2 s: a PyTorch worker's exit on SIGTERM (closing NCCL
//     communicators and data loader processes) takes seconds; the default
//     grace period, 30 s, is its bound.
//   - ProcessStart 10 ms: a fork and exec of the worker by its supervisor
//     (measured on the real nodes: the supervisor's line and the worker's
//     first line a few milliseconds apart); the worker's own start (a
//     Python import) is in neither this nor ContainerStart.
//   - ProcessStop 2 s: the same worker's exit on SIGTERM, whoever sends it.
var RealisticLatency = Latency{
	PodStart:       1500 * time.Millisecond,
	ImagePull:      0,
	ContainerStart: 300 * time.Millisecond,
	ContainerStop:  2 * time.Second,
	ProcessStart:   10 * time.Millisecond,
	ProcessStop:    2 * time.Second,
}

// spend waits d, or until ctx ends; it reports whether ctx is still live.
func spend(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
