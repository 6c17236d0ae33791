#!/usr/bin/env bash
# Builds the root file system of the PyTorch example's image into DIR from
# Debian's packages alone: debootstrap's minbase of bookworm, then
# python3-torch (1.13, CPU, gloo) and nothing it only recommends. No
# container engine is involved; test/images packs DIR as one OCI layer.
#
#   hack/build-pytorch-rootfs.sh DIR
#
# Needs root (debootstrap and chroot) and debootstrap (make node-deps
# installs it). Mounts nothing on the host. Cold: about 1.5 minutes on 2
# cores, most of it apt.
set -euo pipefail

dir=${1:?usage: $0 DIR}
[[ $(id -u) == 0 ]] || { echo "building the PyTorch image needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "building the PyTorch image needs debootstrap: run 'make node-deps'" >&2; exit 1; }

# The machine's own Debian mirror, so that a mirror or proxy it is set up
# with is used here too.
mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}

rm -rf "$dir"
mkdir -p "$dir/etc/dpkg/dpkg.cfg.d"
# Documentation, manuals and translations are never written (about 100 MB
# less); copyright files stay, as Debian's licences ask.
cat >"$dir/etc/dpkg/dpkg.cfg.d/01-inplace-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
debootstrap --variant=minbase bookworm "$dir" "$mirror"
# bookworm's sources, whatever Debian the host runs: its torch 1.13 is the
# one the torchrun fix below is for.
security=http://deb.debian.org/debian-security
[[ $mirror == */debian ]] && security=${mirror%/debian}/debian-security
rm -f "$dir/etc/apt/sources.list"
cat >"$dir/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
chroot "$dir" env DEBIAN_FRONTEND=noninteractive apt-get update -q
chroot "$dir" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-torch

# torchrun on bookworm's Python 3.11 fails every launch in Std.from_str:
# since Python 3.11 iterating a Flag class yields only its single-bit
# members, so the helper finds no member for 0 or 3 and returns None.
# Convert the value directly, as later torch releases do; fail the build if
# the code is not the one this fix is for.
chroot "$dir" python3 - <<'EOF'
import pathlib, torch.distributed.elastic.multiprocessing.api as api
path = pathlib.Path(api.__file__)
src = path.read_text()
old = "            for s in Std:\n                if s == v:\n                    return s\n"
new = "            return Std(v)\n"
if old not in src:
    raise SystemExit(f"{path}: Std.from_str is not the code the torchrun fix expects")
path.write_text(src.replace(old, new))
EOF
chroot "$dir" python3 -c 'from torch.distributed.elastic.multiprocessing.api import Std; assert Std.from_str("3") == Std.ALL'

chroot "$dir" apt-get clean
# What no training process reads: apt's lists and caches, logs, the
# translations debootstrap wrote before the exclusions applied, and the
# C++ test programs of libtorch-test (a dependency of python3-torch).
rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/* "$dir"/var/log/* "$dir"/tmp/* \
  "$dir"/usr/share/locale/* "$dir"/usr/lib/libtorch-test
du -sh "$dir"
