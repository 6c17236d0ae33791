#!/usr/bin/env bash
# Builds the local cluster (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, the kubelet of real nodes, CoreDNS for their Pods, a CNCF
# Distribution image registry) and kubectl from their Go modules into bin/
#
# The Kubernetes binaries come from k8s.io/kubernetes through the wrapper module
# in hack/kube: `go install k8s.io/kubernetes/cmd/...@version` is refused
# because k8s.io/kubernetes's go.mod replaces its staging modules with local
# paths, so the wrapper requires it and replaces every staging module with the
# published version of the same minor. etcd comes the same way through
# hack/etcd, CoreDNS through hack/coredns (its own main with only the
# plugins the cluster uses), the registry through hack/registry, the
# volume provisioner of its default StorageClass through
# hack/local-provisioner, and upstream JobSet's end-to-end suite (a test
# binary, jobset-e2e.test), controller (jobset-controller) and in-place
# restart agent (jobset-in-place-restart-agent) through
# hack/upstream-jobset, Kueue's controller manager (kueue) and its JobSet
# end-to-end specs (kueue-e2e-extended.test) through hack/kueue, Kubeflow
# Trainer's controller manager (trainer-controller-manager) through
# hack/kubeflow-trainer, and the Kubernetes end-to-end tests' agnhost
# (Kueue's specs run it) through hack/kube, and the real nodes' container
# runtime (containerd, containerd-shim-runc-v2, ctr) through hack/containerd:
# Debian 12's containerd is 1.6, which Kubernetes 1.36 no longer supports
# and which cannot mount image volumes. The Kubernetes wrapper modules
# (hack/kube, hack/kueue, hack/kubeflow-trainer) pin the Kubernetes libraries at the cluster's own version: the packages the
# control plane's build compiles are not compiled again.
# Nothing is downloaded except through the Go module proxy.
#
# Idempotent: a binary is rebuilt only when its version stamp differs.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN_DIR:-$root/bin}
mkdir -p "$bin/.stamps"

kube_version=$(cd "$root/hack/kube" && go list -m -f "{{.Version}}" k8s.io/kubernetes)
etcd_version=$(cd "$root/hack/etcd" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
# CoreDNS's stamp covers its plugin list and dependencies too: a change to
# main.go or go.sum rebuilds it.
coredns_version=$(cd "$root/hack/coredns" && echo "$(go list -m -f '{{.Version}}' github.com/coredns/coredns)-$(cat main.go go.sum | sha256sum | cut -c1-12)")
# The registry's covers its dependencies: a fix in one of them rebuilds it.
registry_version=$(cd "$root/hack/registry" && echo "$(go list -m -f '{{.Version}}' github.com/distribution/distribution/v3)-$(sha256sum < go.sum | cut -c1-12)")
# The provisioner's covers its code and dependencies.
provisioner_version=$(cd "$root/hack/local-provisioner" && echo "$(go list -m -f '{{.Version}}' sigs.k8s.io/sig-storage-lib-external-provisioner/v13)-$(cat main.go go.mod go.sum | sha256sum | cut -c1-12)")
# Upstream JobSet's suite: the version it runs, and the dependencies it is
# built with.
jobset_version=$(cd "$root/hack/upstream-jobset" && echo "$(go list -m -f '{{.Version}}' sigs.k8s.io/jobset)-$(cat go.mod go.sum | sha256sum | cut -c1-12)")

# Kueue's and Kubeflow Trainer's: their versions and the dependencies they
# are built with.
kueue_version=$(cd "$root/hack/kueue" && echo "$(go list -m -f '{{.Version}}' sigs.k8s.io/kueue)-$(cat go.mod go.sum | sha256sum | cut -c1-12)")
containerd_version=$(cd "$root/hack/containerd" && echo "$(go list -m -f '{{.Version}}' github.com/containerd/containerd/v2)-$(cat go.mod go.sum | sha256sum | cut -c1-12)")
trainer_version=$(cd "$root/hack/kubeflow-trainer" && echo "$(go list -m -f '{{.Version}}' github.com/kubeflow/trainer/v2)-$(cat go.mod go.sum | sha256sum | cut -c1-12)")

stale() { # name version
  [[ -x "$bin/$1" && "$(cat "$bin/.stamps/$1" 2>/dev/null)" == "$2" ]] && return 1
  return 0
}

kube_bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet)
todo=()
for b in "${kube_bins[@]}"; do stale "$b" "$kube_version" && todo+=("$b"); done
if ((${#todo[@]})); then
  minor=${kube_version#v}; major=${minor%%.*}; minor=${minor#*.}; minor=${minor%%.*}
  ldflags=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  pkgs=()
  for b in "${todo[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  echo ">> building ${todo[*]} $kube_version into $bin (cold: about 7 minutes on 2 cores; cached afterwards)"
  start=$SECONDS
  (cd "$root/hack/kube" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$bin/" "${pkgs[@]}")
  for b in "${todo[@]}"; do echo "$kube_version" > "$bin/.stamps/$b"; done
  echo ">> built ${todo[*]} in $((SECONDS - start))s"
else
  echo ">> kubernetes binaries $kube_version are up to date in $bin"
fi

# build NAME VERSION DIR COLD PKG GOARGS...: unless bin/NAME is stamped
# VERSION, runs `go GOARGS -o bin/NAME PKG` in hack/DIR and stamps it;
# COLD says how long that takes without a cache.
build() {
  local name=$1 version=$2 dir=$3 cold=$4 pkg=$5
  shift 5
  if ! stale "$name" "$version"; then
    echo ">> $name $version is up to date in $bin"
    return
  fi
  echo ">> building $name $version into $bin (cold: $cold)"
  local start=$SECONDS
  (cd "$root/hack/$dir" && CGO_ENABLED=0 go "$@" -o "$bin/$name" "$pkg")
  echo "$version" > "$bin/.stamps/$name"
  echo ">> built $name in $((SECONDS - start))s"
}

release=(build -trimpath -ldflags "-s -w")
build etcd "$etcd_version" etcd "about 1 minute" go.etcd.io/etcd/server/v3 "${release[@]}"
build coredns "$coredns_version" coredns "about 1 minute" . "${release[@]}"
build registry "$registry_version" registry "about 1 minute" github.com/distribution/distribution/v3/cmd/registry "${release[@]}"
build local-provisioner "$provisioner_version" local-provisioner "about 1 minute" . "${release[@]}"
# Upstream JobSet's e2e suite as a test binary, its controller, its agent.
build jobset-e2e.test "$jobset_version" upstream-jobset "about 2 minutes" sigs.k8s.io/jobset/test/e2e test -c -trimpath
build jobset-controller "$jobset_version" upstream-jobset "about 1 minute" sigs.k8s.io/jobset "${release[@]}"
build jobset-in-place-restart-agent "$jobset_version" upstream-jobset "about 1 minute" sigs.k8s.io/jobset/cmd/in-place-restart-agent "${release[@]}"
# agnhost, at the cluster's version.
build agnhost "$kube_version" kube "seconds, after the control plane" k8s.io/kubernetes/test/images/agnhost "${release[@]}"
# Kueue's manager, stamped with its version as its Makefile stamps it, and
# its suite of JobSet (and other integrations') end-to-end specs.
build kueue "$kueue_version" kueue "about 2.5 minutes" sigs.k8s.io/kueue/cmd/kueue \
  build -trimpath -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=${kueue_version%%-*}"
build kueue-e2e-extended.test "$kueue_version" kueue "about 30 seconds" sigs.k8s.io/kueue/test/e2e/singlecluster/extended test -c -trimpath
build trainer-controller-manager "$trainer_version" kubeflow-trainer "about 40 seconds" github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager "${release[@]}"
# containerd stamped with its version, as its Makefile stamps it: the
# kubelet reports it as the node's runtime version.
for b in containerd containerd-shim-runc-v2 ctr; do
  build "$b" "$containerd_version" containerd "about 1.5 minutes" "github.com/containerd/containerd/v2/cmd/$b" \
    build -trimpath -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=${containerd_version%%-*}"
done
