#!/usr/bin/env bash
# The PyTorch demo: a local cluster with 2 real nodes, the example's image
# built from Debian's packages and imported into them, examples/pytorch
# trained with DDP, one rank crashed after a checkpoint, and the restart as
# a timeline, in place and then with Recreate. Runs from a fresh clone, as
# root. SCOPE=container, SCOPE=process or SCOPE=in-process runs the in-place
# restart in that scope only (default: all three). DEMO_ARGS are passed to
# the demo (-repeats 3 -json F: the benchmark).
set -euo pipefail

case "${SCOPE:-}" in
  "") strategies=InPlaceRestart,InPlaceRestart/process,InPlaceRestart/in-process,Recreate ;;
  container) strategies=InPlaceRestart,Recreate ;;
  process) strategies=InPlaceRestart/process,Recreate ;;
  in-process) strategies=InPlaceRestart/in-process,Recreate ;;
  *)
    echo "SCOPE=$SCOPE: use container, process or in-process (or leave it unset for all three)" >&2
    exit 2
    ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
cleanup() {
  make -C "$root" --no-print-directory cluster-down || true
  grep -h "left on the host" -A20 "$root/.local/cluster.log" 2>/dev/null || true
}
trap cleanup EXIT

printf '\n\033[1m== the PyTorch image: Debian bookworm with python3-torch, built without a container engine\033[0m\n'
(cd "$root" && go run ./test/cmd/image-pytorch -sockets none)
printf '\n\033[1m== starting the local cluster: control plane, inplace-manager, 2 real nodes, CoreDNS\033[0m\n'
make -C "$root" --no-print-directory cluster-up NODES=0 REAL_NODES=2
(cd "$root" && go run ./test/cmd/image-pytorch)
cd "$root"
# shellcheck disable=SC2086 # DEMO_ARGS are flags, split on purpose
go run ./test/cmd/demo-pytorch -cluster-kubeconfig "$root/.local/kubeconfig" -kubectl "$root/bin/kubectl" -strategies "$strategies" ${DEMO_ARGS:-}
