#!/usr/bin/env bash
# The implementation of `make cluster-up` and `make cluster-down`, the one
# way to start and stop the local cluster by hand (the demos use them too):
# run those, which build the cluster's binaries first, rather than this.
#
# up starts test/cmd/local-cluster in the background with NODES simulated
# nodes (default 16, 0 when REAL_NODES is set) and REAL_NODES real ones
# (default 0; installs their packages first), and returns once it has
# written .local/kubeconfig; a cluster already running is left as it is.
# down stops every process it started and leaves nothing running.
# With INPLACE_CLUSTER_OWNER_PID set to a process id in the environment of
# up, the cluster also stops (as down stops it) once that process has
# exited: a test that runs up sets it to its own id, so that the cluster,
# which nohup detaches from it, does not outlive it if it is killed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
local_dir="$root/.local"
pidfile="$local_dir/cluster.pid"
kubeconfig="$local_dir/kubeconfig"
log="$local_dir/cluster.log"
mkdir -p "$local_dir"

running() { [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

up() {
  if running; then
    echo "local cluster already running (pid $(cat "$pidfile")); kubeconfig: $kubeconfig"
    return 0
  fi
  rm -f "$kubeconfig"
  sim_nodes=${NODES:-16}
  if ((${REAL_NODES:-0} > 0)); then
    "$root/hack/install-node-deps.sh"
    sim_nodes=${NODES:-0}
  fi
  (cd "$root" && go build -o "$root/bin/local-cluster" ./test/cmd/local-cluster)
  cd "$root"
  nohup "$root/bin/local-cluster" -write-kubeconfig "$kubeconfig" -nodes "$sim_nodes" -real-nodes "${REAL_NODES:-0}" >"$log" 2>&1 &
  echo $! >"$pidfile"
  for _ in $(seq 1 3000); do
    if [[ -f $kubeconfig ]]; then
      echo "local cluster is up (pid $(cat "$pidfile"))"
      echo "  kubeconfig: $kubeconfig"
      echo "  try:        bin/kubectl --kubeconfig $kubeconfig get --raw /readyz"
      return 0
    fi
    if ! running; then
      echo "local cluster failed to start; its log ($log):" >&2
      tail -n 50 "$log" >&2
      rm -f "$pidfile"
      return 1
    fi
    sleep 0.1
  done
  echo "local cluster did not become ready in 300s; see $log" >&2
  down
  return 1
}

down() {
  if ! running; then
    echo "local cluster is not running"
    rm -f "$pidfile" "$kubeconfig"
    return 0
  fi
  pid=$(cat "$pidfile")
  kill -TERM "$pid"
  # Real nodes take a while to stop: containers, shims, mounts, cgroups.
  for _ in $(seq 1 1200); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "local cluster did not stop in 120s; killing it" >&2
    kill -KILL "$pid"
  fi
  rm -f "$pidfile" "$kubeconfig"
  echo "local cluster stopped"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
