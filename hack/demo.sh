#!/usr/bin/env bash
# The demo: a local cluster (real control plane, inplace-manager, and real
# nodes — a kubelet and a containerd each — running the project's images), a
# JobSet that says only `restartStrategy: InPlaceRestart`, one worker
# failure, and the recovery as a timeline; then the same with Recreate.
# Runs from a fresh clone, as root. REAL_NODES=0 NODES=16 runs it on
# simulated nodes instead.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cleanup() {
  # The teardown's own words: real nodes report anything they left.
  make -C "$root" --no-print-directory cluster-down || true
  grep -h "left on the host" -A20 "$root/.local/cluster.log" 2>/dev/null || true
}
trap cleanup EXIT

real=${REAL_NODES:-4}
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
