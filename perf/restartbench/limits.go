package restartbench

import (
	"fmt"
	"syscall"
)

// fdsPerPod is how many file descriptors this process holds per simulated
// Pod: the agent's connection to the API server. The probes and the
// agents' reports to the leader go over the simulated nodes' in-memory
// Pod network.
const fdsPerPod = 1

// fdsSpare covers everything else: the manager, the kubelets' shared
// client, the control plane's logs.
const fdsSpare = 4096

// ensureFileLimit raises this process's open-file limit (inherited by the
// control plane it starts) to what N simulated Pods need, or says what to
// change. Go raises the soft limit to the hard one at start, which is
// enough unless the hard one is low.
func ensureFileLimit(nodes int) error {
	need := uint64(fdsPerPod*nodes + fdsSpare)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("reading the open-file limit: %w", err)
	}
	if lim.Cur >= need {
		return nil
	}
	raised := syscall.Rlimit{Cur: need, Max: max(lim.Max, need)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
		return fmt.Errorf("%d simulated nodes need %d open files (%d per simulated Pod), the limit is %d and raising it failed (%w): raise it with `ulimit -n %d` (as root, or in /etc/security/limits.conf) or run a smaller N",
			nodes, need, fdsPerPod, lim.Cur, err, need)
	}
	return nil
}
