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
#                  the PodGroup CRD and the Coscheduling example configuration; and
#                  the module's controller (PodGroup status) with the ElasticQuota CRD
#   trainer/       Kubeflow Trainer's controller manager (and its webhooks), plus its
#                  CRDs and ClusterTrainingRuntimes
#   karpenter/     Karpenter's kwok provider (the Karpenter controller whose cloud
#                  provider creates kwok nodes), plus its CRDs (NodePool, NodeClaim,
#                  NodeOverlay, CapacityBuffer, KWOKNodeClass).
#                  sigs.k8s.io/karpenter v1.15.0 needs Go >= 1.26.9, so this component
#                  alone builds with GOTOOLCHAIN=go1.27.3 (the go command fetches that
#                  toolchain from the Go module proxy, ~76 MB, once per machine).
#   kueue/         Kueue's controller manager (and its webhooks), plus its CRDs and
#                  webhook manifests (the sandbox starts it only when named in
#                  --components)
#   kuberay/       KubeRay's ray-operator (RayCluster, RayJob, RayService controllers;
#                  its RayCluster webhook is compiled in but off unless ENABLE_WEBHOOKS=true),
#                  plus its CRDs (the sandbox starts it only when named in --components)
#   helm/          the helm command, which lints, renders, installs, upgrades and
#                  uninstalls the chart in deploy/helm/gangkeeper in the Helm tests
#   cert-manager/  cert-manager's CRDs only (its controller and cainjector are nested
#                  modules the module proxy does not serve: see the wrapper's tools.go)
#   provisioning-request/  the ProvisioningRequest CRD only (autoscaling.x-k8s.io/v1, from
#                  cluster-autoscaler's API module k8s.io/autoscaler/cluster-autoscaler/apis;
#                  cluster-autoscaler itself is not built: see the wrapper's tools.go)
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
all=(k8s kwok jobset lws scheduler-plugins trainer kueue kuberay helm cert-manager karpenter provisioning-request)
wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=("${all[@]}")

required() { # required WRAPPER MODULE: the version the wrapper's go.mod pins
  awk -v m="$2" '$1 == "require" && $2 == m {print $3} $1 == m {print $2}' "$here/$1/go.mod" | head -1
}
progress() { echo "build.sh: $*" >&2; }
# On a terminal a person waits minutes for a Go build: say every 15 s that it is still
# going. In CI (CI set) or into a pipe or log file, only the plain progress lines.
live=false
[[ -t 2 && -z ${CI:-} && ${TERM:-} != dumb ]] && live=true
ticker() { # ticker NAME: runs until killed
  local start=$SECONDS
  while sleep 15; do printf 'build.sh:   ... still building %s (%ds)\n' "$1" $((SECONDS - start)) >&2; done
}

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
    local start tick=""; start=$(date +%s)
    # set -e ends the script if the build fails; the EXIT trap stops the ticker then.
    if $live; then ticker "$name" & tick=$!; trap "kill $tick 2>/dev/null" EXIT; fi
    "$@"
    if [[ -n $tick ]]; then kill "$tick"; trap - EXIT; fi
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
# The controller has its own stamp: a cache built before it existed gains it without
# rebuilding (or replacing) the scheduler binary a running sandbox may be using.
build_scheduler_plugins_controller() {
  progress "building the scheduler-plugins controller $sp_version"
  build_go scheduler-plugins sigs.k8s.io/scheduler-plugins/cmd/controller "$sp_dir/bin/scheduler-plugins-controller"
  copy_module_dirs scheduler-plugins sigs.k8s.io/scheduler-plugins "$sp_dir" manifests/capacityscheduling
}

trainer_version=$(required trainer github.com/kubeflow/trainer/v2)
trainer_dir="$cache_root/trainer-$trainer_version"
build_trainer() {
  progress "building the Kubeflow Trainer controller manager $trainer_version"
  build_go trainer github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager "$trainer_dir/bin/trainer-controller-manager"
  copy_module_dirs trainer github.com/kubeflow/trainer/v2 "$trainer_dir" \
    manifests/base/crds manifests/base/webhook manifests/base/runtimes
}

kueue_version=$(required kueue sigs.k8s.io/kueue)
kueue_dir="$cache_root/kueue-$kueue_version"
build_kueue() {
  progress "building the Kueue controller manager $kueue_version"
  build_go kueue sigs.k8s.io/kueue/cmd/kueue "$kueue_dir/bin/kueue-manager"
  copy_module_dirs kueue sigs.k8s.io/kueue "$kueue_dir" config/components/crd config/components/webhook
}

kuberay_version=$(required kuberay github.com/ray-project/kuberay/ray-operator)
kuberay_dir="$cache_root/kuberay-$kuberay_version"
build_kuberay() {
  progress "building KubeRay's ray-operator $kuberay_version"
  build_go kuberay github.com/ray-project/kuberay/ray-operator "$kuberay_dir/bin/ray-operator"
  copy_module_dirs kuberay github.com/ray-project/kuberay/ray-operator "$kuberay_dir" config/crd/bases
}

karpenter_version=$(required karpenter sigs.k8s.io/karpenter)
karpenter_dir="$cache_root/karpenter-$karpenter_version"
# The toolchain Karpenter's go.mod asks for (>= 1.26.9) is newer than the machine's
# Go; only this component's go commands run with it, so the other wrappers keep
# building with the machine's Go.
karpenter_toolchain=go1.27.3
build_karpenter() {
  progress "building Karpenter's kwok provider $karpenter_version (GOTOOLCHAIN=$karpenter_toolchain)"
  (
    export GOTOOLCHAIN=$karpenter_toolchain
    build_go karpenter sigs.k8s.io/karpenter/kwok "$karpenter_dir/bin/karpenter-kwok"
    copy_module_dirs karpenter sigs.k8s.io/karpenter "$karpenter_dir" pkg/apis/crds kwok/apis/crds
  )
}

helm_version=$(required helm helm.sh/helm/v3)
helm_dir="$cache_root/helm-$helm_version"
build_helm() {
  progress "building helm $helm_version"
  # The ldflags of helm's own Makefile: the version it prints, and the Kubernetes
  # version `helm template`/`helm lint` assume without a cluster (client-go's minor;
  # unset, helm assumes v1.20 and a chart's kubeVersion check refuses to render).
  local client_go minor flags
  client_go=$(required helm k8s.io/client-go)
  minor=$(echo "$client_go" | cut -d. -f2)
  flags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
  flags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    flags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
  done
  (cd "$here/helm" && go build -trimpath -ldflags="$flags" -o "$helm_dir/bin/helm" helm.sh/helm/v3/cmd/helm)
}

cm_version=$(required cert-manager github.com/cert-manager/cert-manager)
cm_dir="$cache_root/cert-manager-$cm_version"
build_cert_manager() {
  progress "copying cert-manager $cm_version's CRDs"
  (cd "$here/cert-manager" && go mod download github.com/cert-manager/cert-manager)
  copy_module_dirs cert-manager github.com/cert-manager/cert-manager "$cm_dir" deploy/crds
}

pr_version=$(required provisioning-request k8s.io/autoscaler/cluster-autoscaler/apis)
pr_dir="$cache_root/provisioning-request-$pr_version"
build_provisioning_request() {
  progress "copying the ProvisioningRequest CRD of cluster-autoscaler's apis $pr_version"
  (cd "$here/provisioning-request" && go mod download k8s.io/autoscaler/cluster-autoscaler/apis)
  copy_module_dirs provisioning-request k8s.io/autoscaler/cluster-autoscaler/apis "$pr_dir" config/crd
}

step=0
for c in "${wanted[@]}"; do
  step=$((step + 1))
  progress "[$step/${#wanted[@]}] $c"
  case $c in
    k8s) with_lock k8s "$k8s_bin/.complete-$k8s_version-etcd-$etcd_version" build_k8s ;;
    kwok) with_lock kwok "$kwok_dir/.complete" build_kwok ;;
    jobset) with_lock jobset "$jobset_dir/.complete" build_jobset ;;
    lws) with_lock lws "$lws_dir/.complete" build_lws ;;
    scheduler-plugins)
      with_lock scheduler-plugins "$sp_dir/.complete" build_scheduler_plugins
      with_lock scheduler-plugins-controller "$sp_dir/.complete-controller" build_scheduler_plugins_controller
      ;;
    trainer) with_lock trainer "$trainer_dir/.complete" build_trainer ;;
    kueue) with_lock kueue "$kueue_dir/.complete" build_kueue ;;
    kuberay) with_lock kuberay "$kuberay_dir/.complete" build_kuberay ;;
    karpenter) with_lock karpenter "$karpenter_dir/.complete" build_karpenter ;;
    helm) with_lock helm "$helm_dir/.complete" build_helm ;;
    cert-manager) with_lock cert-manager "$cm_dir/.complete" build_cert_manager ;;
    provisioning-request)
      with_lock provisioning-request "$pr_dir/.complete" build_provisioning_request ;;
    *) echo "build.sh: unknown component '$c' (known: ${all[*]})" >&2; exit 2 ;;
  esac
done
echo "$k8s_bin"
