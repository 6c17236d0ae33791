package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ownerEnv names the variable that gives the cluster an owner: the id of a
// process whose exit stops the cluster, as SIGTERM does. A test that starts
// the cluster through `make cluster-up` sets it to its own process id, so
// that the cluster does not outlive it when it is killed before it can run
// `make cluster-down` (hack/cluster.sh starts the cluster with nohup, out of
// reach of the test's own process group and of Pdeathsig).
const ownerEnv = "INPLACE_CLUSTER_OWNER_PID"

// ownerFromEnv returns the process id ownerEnv gives, or 0 if it is unset.
func ownerFromEnv() (int, error) {
	v := os.Getenv(ownerEnv)
	if v == "" {
		return 0, nil
	}
	pid, err := strconv.Atoi(v)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s=%q: not a process id", ownerEnv, v)
	}
	return pid, nil
}

// watchProcess returns a channel closed once the process pid has exited
// (at once if there is no such process). It waits on a pidfd, which becomes
// readable when the process exits, whether it is a child of this process
// or not: no polling, and no confusion with a later process given the same
// id once the watch has begun.
func watchProcess(pid int) (<-chan struct{}, error) {
	gone := make(chan struct{})
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		close(gone)
		return gone, nil
	}
	if err != nil {
		return nil, fmt.Errorf("watching process %d: pidfd_open: %w", pid, err)
	}
	go func() {
		defer close(gone)
		defer func() { _ = unix.Close(fd) }()
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, -1)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			// An error other than EINTR cannot happen on a valid pidfd;
			// should one, the cluster stops rather than outlive its owner
			// unwatched.
			if err != nil || n > 0 {
				return
			}
		}
	}()
	return gone, nil
}
