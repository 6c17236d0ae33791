#!/usr/bin/env bash
# Installs what real nodes of the local cluster need from Debian's packages:
# runc (the OCI runtime), the CNI plugins (bridge, host-local, portmap,
# loopback in /usr/lib/cni), iptables and iproute2, and debootstrap for the
# PyTorch image. The kubelet and containerd are built from their Go modules
# by build-cluster-binaries.sh.
#
# Idempotent: installs only what is missing. Each real node runs its own
# containerd as a plain process.
set -euo pipefail

need=()
command -v runc >/dev/null || need+=(runc)
[[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
command -v iptables >/dev/null || need+=(iptables)
command -v ip >/dev/null || need+=(iproute2)
# debootstrap builds the PyTorch example's image (make image-pytorch).
command -v debootstrap >/dev/null || need+=(debootstrap)
if ((${#need[@]} == 0)); then
  echo ">> real-node packages are installed (runc $(runc --version | awk 'NR==1{print $3}'))"
  exit 0
fi
if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
  msg="real nodes need ${need[*]}: run as root on Debian, or install them (sudo apt-get install -y ${need[*]})"
  if [[ ${INPLACE_REAL_NODES:-} == required ]]; then
    echo "$msg" >&2
    exit 1
  fi
  echo ">> $msg; the real-node tests will be skipped" >&2
  exit 0
fi
echo ">> installing ${need[*]} from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
# No service a package would start may start here: the nodes run their own
# processes.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  created_policy=1
fi
trap '((created_policy)) && rm -f "$policy"' EXIT
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo ">> installed ${need[*]}"
