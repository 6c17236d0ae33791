#!/usr/bin/env bash
# The demo: a local cluster (real control plane, inplace-manager, and real
# nodes — a kubelet and a containerd each — running the project's images), a
# JobSet that says only `restartStrategy: InPlaceRestart`, one worker
# failure, and the recovery as a timeline; then the same with Recreate.
# Runs from a fresh clone. Real nodes need root, Debian's runc (installed
# here when missing), containerd (built from its module) and the cgroup v1
# hierarchies; where the machine
# cannot run them the demo says why in one line and runs on 16 simulated
# nodes instead. REAL_NODES=K (K real nodes) or REAL_NODES=0 NODES=N (N
# simulated ones) chooses.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cleanup() {
  # The teardown's own words: real nodes report anything they left.
  make -C "$root" --no-print-directory cluster-down || true
  grep -h "left on the host" -A20 "$root/.local/cluster.log" 2>/dev/null || true
}
trap cleanup EXIT

if [[ -z ${REAL_NODES:-} ]]; then
  # Chosen for the user: real nodes where this machine can run them.
  "$root/hack/install-node-deps.sh"
  (cd "$root" && go build -o "$root/bin/local-cluster" ./test/cmd/local-cluster)
  if why=$("$root/bin/local-cluster" -check-real-nodes); then
    REAL_NODES=4
  else
    printf '\n\033[1m== real nodes cannot run on this machine (%s): running on simulated nodes, which run the real agent but no containers\033[0m\n' "$why"
    REAL_NODES=0
  fi
fi
real=$REAL_NODES
if ((real > 0)); then sim=${NODES:-0}; else sim=${NODES:-16}; fi
if ((real > 0)); then
  what="$real real nodes (kubelet and containerd)"
else
  what="$sim simulated nodes"
fi
printf '\n\033[1m== starting the local cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, inplace-manager, %s\033[0m\n' "$what"
make -C "$root" --no-print-directory cluster-up NODES="$sim" REAL_NODES="$real"
"$root/bin/kubectl" --kubeconfig "$root/.local/kubeconfig" get nodes -o wide

cd "$root"
go run ./test/cmd/demo -cluster-kubeconfig "$root/.local/kubeconfig" -kubectl "$root/bin/kubectl"
