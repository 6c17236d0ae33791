#!/usr/bin/env bash
# The demo: a local cluster (real control plane, inplace-manager, 16
# simulated nodes running the real agent), a JobSet that says only
# `restartStrategy: InPlaceRestart`, one worker failure, and the recovery as
# a timeline; then the same with Recreate. Runs from a fresh clone.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cleanup() { "$root/hack/cluster.sh" down >/dev/null 2>&1 || true; }
trap cleanup EXIT

printf '\n\033[1m== starting the local cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, inplace-manager, 16 simulated nodes\033[0m\n'
NODES=${NODES:-16} "$root/hack/cluster.sh" up
"$root/bin/kubectl" --kubeconfig "$root/.local/kubeconfig" get nodes

cd "$root"
go run ./test/cmd/demo -cluster-kubeconfig "$root/.local/kubeconfig"
