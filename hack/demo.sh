#!/usr/bin/env bash
# The demo: brings up the local cluster, shows what it serves, and tears it
# down. Runs from a fresh clone with nothing else installed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
kubectl=("$root/bin/kubectl" --kubeconfig "$root/.local/kubeconfig")

cleanup() { "$root/hack/cluster.sh" down >/dev/null 2>&1 || true; }
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "starting the local cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)"
start=$SECONDS
"$root/hack/cluster.sh" up
echo "up in $((SECONDS - start))s"

step "readiness"
"${kubectl[@]}" get --raw /readyz; echo
"${kubectl[@]}" version

step "nodes"
"${kubectl[@]}" get nodes -o wide

step "API resources of the JobSet group"
"${kubectl[@]}" api-resources --api-group=jobset.x-k8s.io

step "the JobSet CRD"
"${kubectl[@]}" get crd jobsets.jobset.x-k8s.io
"${kubectl[@]}" explain jobset.spec.failurePolicy

step "stopping the local cluster"
cleanup
trap - EXIT
echo "done"
