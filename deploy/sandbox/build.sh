#!/usr/bin/env bash
# Builds what gangkeeper's sandbox and end-to-end tests run, from Go modules pinned
# in the wrapper modules beside this script, one wrapper per component so that
# their dependency graphs cannot pull each other:
#
#   k8s/ + etcd/   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
#   kwok/          the kwok controller (fake nodes whose pods start, become Ready, finish)
#   jobset/        the JobSet controller manager (and its webhooks), plus its CRDs
#   lws/           the LeaderWorkerSet controller manager (and its webhooks), plus its CRDs
#   scheduler-plugins/  kube-scheduler with the scheduler-plugins (Coscheduling), plus
#                  the PodGroup CRD and the Coscheduling example configuration
#   trainer/       Kubeflow Trainer's controller manager (and its webhooks), plus its
#                  CRDs and ClusterTrainingRuntimes
#
# Everything lands in a cache outside the work tree, one folder per component and
# version, and is reused: a second run does nothing.
#
#   deploy/sandbox/build.sh              # build (or reuse) everything, print the k8s bin dir
#   deploy/sandbox/build.sh kwok jobset  # only these components
#   GANGKEEPER_K8S_CACHE=DIR build.sh    # another cache root
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${GANGKEEPER_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gangkeeper}
all=(k8s kwok jobset lws scheduler-plugins trainer)
wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=("${all[@]}")

required() { # required WRAPPER MODULE: the version the wrapper's go.mod pins
  awk -v m="$2" '$1 == "require" && $2 == m {print $3} $1 == m {print $2}' "$here/$1/go.mod" | head -1
}
progress() { echo "build.sh: $*" >&2; }

command -v go >/dev/null || { echo "build.sh: Go is required (https://go.dev/doc/install)" >&2; exit 2; }
export CGO_ENABLED=0 GOFLAGS=-mod=mod
mkdir -p "$cache_root"

# build_component NAME VERSION STAMP_INPUTS... -- BUILD_FUNCTION
# One build at a time per component and version: a second caller (a CI step,
# another shell) waits for the first and then finds everything built.
with_lock() {
  local name=$1 stamp=$2; shift 2
  if [[ -f "$stamp" ]]; then return 0; fi
  exec 9>"$cache_root/.build-$name.lock"
  command -v flock >/dev/null && flock 9
  if [[ ! -f "$stamp" ]]; then
    local start; start=$(date +%s)
    "$@"
    touch "$stamp"
    progress "$name built in $(( $(date +%s) - start ))s"
  fi
  exec 9>&-
}

# Copies folders of a module (CRDs, webhook manifests) from the module cache into
# the component's cache dir, so the sandbox installs exactly what that version ships.
copy_module_dirs() { # WRAPPER MODULE DEST SUBDIR...
  local wrapper=$1 module=$2 dest=$3; shift 3
  local src; src=$(cd "$here/$wrapper" && go list -m -f '{{.Dir}}' "$module")
  local d
  for d in "$@"; do
    mkdir -p "$dest/$(dirname "$d")"
    rm -rf "${dest:?}/$d"
    cp -R "$src/$d" "$dest/$d"
    chmod -R u+w "$dest/$d"
  done
}

k8s_version=$(required k8s k8s.io/kubernetes)
etcd_version=$(required etcd go.etcd.io/etcd/server/v3)
k8s_bin="$cache_root/k8s-$k8s_version/bin"

build_k8s() {
  mkdir -p "$k8s_bin"
  (
    cd "$here/etcd"
    progress "building etcd $etcd_version"
    go build -trimpath -ldflags="-s -w" -o "$k8s_bin/etcd" go.etcd.io/etcd/server/v3
  )
  (
    cd "$here/k8s"
    # Stamp the release into the binaries so that version discovery and kubectl's
    # skew check see v1.37.x instead of v0.0.0-master.
    local ldflags="-s -w" pkg cmd
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1"
      ldflags+=" -X $pkg.gitMinor=$(echo "$k8s_version" | cut -d. -f2)"
      ldflags+=" -X $pkg.gitTreeState=clean"
    done
    for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
      progress "building $cmd $k8s_version"
      go build -trimpath -ldflags="$ldflags" -o "$k8s_bin/$cmd" "k8s.io/kubernetes/cmd/$cmd"
    done
  )
}

# build_go WRAPPER PACKAGE OUTPUT: one binary from one wrapper module.
build_go() {
  (cd "$here/$1" && go build -trimpath -ldflags="-s -w" -o "$3" "$2")
}

kwok_version=$(required kwok sigs.k8s.io/kwok)
kwok_dir="$cache_root/kwok-$kwok_version"
build_kwok() {
  progress "building kwok $kwok_version"
  build_go kwok sigs.k8s.io/kwok/cmd/kwok "$kwok_dir/bin/kwok"
}

jobset_version=$(required jobset sigs.k8s.io/jobset)
jobset_dir="$cache_root/jobset-$jobset_version"
build_jobset() {
  progress "building the JobSet controller $jobset_version"
  build_go jobset sigs.k8s.io/jobset "$jobset_dir/bin/jobset-controller"
  copy_module_dirs jobset sigs.k8s.io/jobset "$jobset_dir" \
    config/components/crd/bases config/components/webhook
}

lws_version=$(required lws sigs.k8s.io/lws)
lws_dir="$cache_root/lws-$lws_version"
build_lws() {
  progress "building the LeaderWorkerSet controller $lws_version"
  build_go lws sigs.k8s.io/lws/cmd "$lws_dir/bin/lws-controller"
  copy_module_dirs lws sigs.k8s.io/lws "$lws_dir" config/crd/bases config/webhook
}

sp_version=$(required scheduler-plugins sigs.k8s.io/scheduler-plugins)
sp_dir="$cache_root/scheduler-plugins-$sp_version"
build_scheduler_plugins() {
  progress "building the scheduler-plugins scheduler $sp_version"
  build_go scheduler-plugins sigs.k8s.io/scheduler-plugins/cmd/scheduler "$sp_dir/bin/scheduler-plugins-scheduler"
  copy_module_dirs scheduler-plugins sigs.k8s.io/scheduler-plugins "$sp_dir" manifests/coscheduling
}

trainer_version=$(required trainer github.com/kubeflow/trainer/v2)
trainer_dir="$cache_root/trainer-$trainer_version"
build_trainer() {
  progress "building the Kubeflow Trainer controller manager $trainer_version"
  build_go trainer github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager "$trainer_dir/bin/trainer-controller-manager"
  copy_module_dirs trainer github.com/kubeflow/trainer/v2 "$trainer_dir" \
    manifests/base/crds manifests/base/webhook manifests/base/runtimes
}

for c in "${wanted[@]}"; do
  case $c in
    k8s) with_lock k8s "$k8s_bin/.complete-$k8s_version-etcd-$etcd_version" build_k8s ;;
    kwok) with_lock kwok "$kwok_dir/.complete" build_kwok ;;
    jobset) with_lock jobset "$jobset_dir/.complete" build_jobset ;;
    lws) with_lock lws "$lws_dir/.complete" build_lws ;;
    scheduler-plugins) with_lock scheduler-plugins "$sp_dir/.complete" build_scheduler_plugins ;;
    trainer) with_lock trainer "$trainer_dir/.complete" build_trainer ;;
    *) echo "build.sh: unknown component '$c' (known: ${all[*]})" >&2; exit 2 ;;
  esac
done
echo "$k8s_bin"
