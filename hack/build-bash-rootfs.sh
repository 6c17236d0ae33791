#!/usr/bin/env bash
# Builds the root file system of the local cluster's bash image into DIR
# from Debian's packages alone: debootstrap's minbase of bookworm (bash,
# coreutils) and iputils-ping. test/images packs DIR as one layer and
# pushes it to the cluster's registry as library/bash:latest, the image
# suites written for kind clusters run (docker.io/library/bash:latest,
# which the real nodes' containerd mirrors to that registry). No container
# engine is involved.
#
#   hack/build-bash-rootfs.sh DIR
#
# Needs root (debootstrap) and debootstrap ('make node-deps'). debootstrap
# mounts /proc and /sys under DIR while it installs, and unmounts them
# when it ends, on an error or SIGTERM too. Cold: about a minute on 2
# cores, most of it apt.
set -euo pipefail

dir=${1:?usage: $0 DIR}
[[ $(id -u) == 0 ]] || { echo "building the bash image needs root (debootstrap)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "building the bash image needs debootstrap: run 'make node-deps'" >&2; exit 1; }

mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}

rm -rf "$dir"
mkdir -p "$dir/etc/dpkg/dpkg.cfg.d"
cat >"$dir/etc/dpkg/dpkg.cfg.d/01-inplace-slim" <<'SLIM'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
SLIM
debootstrap --variant=minbase --include=iputils-ping bookworm "$dir" "$mirror"
rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/* "$dir"/var/log/* "$dir"/tmp/* "$dir"/usr/share/locale/*
du -sh "$dir"
