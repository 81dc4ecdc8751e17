#!/usr/bin/env bash
# Builds the control plane gangkeeper's sandbox and end-to-end tests run: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl, from Go
# modules pinned in the wrapper modules beside this script. The binaries land in a
# cache outside the work tree and are reused: a second run does nothing.
#
#   deploy/sandbox/build.sh            # build (or reuse) and print the bin dir
#   GANGKEEPER_K8S_CACHE=DIR build.sh  # another cache root
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
k8s_version=$(awk '/^require k8s.io\/kubernetes /{print $3}' "$here/k8s/go.mod")
etcd_version=$(awk '/^require go.etcd.io\/etcd\/server\/v3 /{print $3}' "$here/etcd/go.mod")
cache_root=${GANGKEEPER_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gangkeeper}
bin="$cache_root/k8s-$k8s_version/bin"
stamp="$bin/.complete-$k8s_version-etcd-$etcd_version"

components=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
built() {
  [[ -f "$stamp" ]] || return 1
  local c
  for c in "${components[@]}"; do [[ -x "$bin/$c" ]] || return 1; done
}

if built; then
  echo "$bin"
  exit 0
fi

# One build at a time per cache: a second caller (CI step, another shell) waits
# for the first and then finds everything built instead of racing it.
mkdir -p "$cache_root"
exec 9>"$cache_root/.build-$k8s_version.lock"
if command -v flock >/dev/null; then
  flock 9
  if built; then
    echo "$bin"
    exit 0
  fi
fi

command -v go >/dev/null || { echo "build.sh: Go is required (https://go.dev/doc/install)" >&2; exit 2; }
mkdir -p "$bin"
export CGO_ENABLED=0 GOFLAGS=-mod=mod
start=$(date +%s)

(
  cd "$here/etcd"
  echo "building etcd $etcd_version" >&2
  go build -trimpath -ldflags="-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
)
(
  cd "$here/k8s"
  # Stamp the release into the binaries so that version discovery and kubectl's
  # skew check see v1.37.x instead of v0.0.0-master.
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1"
    ldflags+=" -X $pkg.gitMinor=$(echo "$k8s_version" | cut -d. -f2)"
    ldflags+=" -X $pkg.gitTreeState=clean"
  done
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    echo "building $cmd $k8s_version" >&2
    go build -trimpath -ldflags="$ldflags" -o "$bin/$cmd" "k8s.io/kubernetes/cmd/$cmd"
  done
)
touch "$stamp"
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
