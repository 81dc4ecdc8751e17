"""Where the control-plane binaries of the sandbox are.

`deploy/sandbox/build.sh` builds etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kubectl (and the neighbours in `neighbours.py`, and helm) into a
cache outside the work tree; this module finds the control plane (env
`GANGKEEPER_K8S_BIN` first) and helm (env `GANGKEEPER_HELM` first), and names the
build command when one is missing.
Reads the environment and stats files; starts nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gangkeeper.policies.errors import BinariesMissing as BinariesMissing

#: The release pinned in deploy/sandbox/k8s/go.mod; the cache dir is named after it.
K8S_VERSION = "v1.37.2"
#: The release pinned in deploy/sandbox/helm/go.mod (the chart's tests run it).
HELM_VERSION = "v3.22.0"
#: The release pinned in deploy/sandbox/cert-manager/go.mod: only its CRDs are built
#: (its controller and cainjector are nested modules the module proxy does not serve).
CERT_MANAGER_VERSION = "v1.21.2"
#: The version of cluster-autoscaler's API module pinned in
#: deploy/sandbox/provisioning-request/go.mod: only its ProvisioningRequest CRD is used.
PROVISIONING_REQUEST_VERSION = "v0.0.0-20240830133931-adfbe7e45277"
BUILD_COMMAND = "deploy/sandbox/build.sh"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path


def cache_root() -> Path:
    """The cache build.sh installs every component into (mirrors its rules)."""
    root = os.environ.get("GANGKEEPER_K8S_CACHE")
    if root is None:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = str(Path(cache) / "gangkeeper")
    return Path(root)


def default_bin_dir() -> Path:
    """The directory build.sh installs the control plane into."""
    return cache_root() / f"k8s-{K8S_VERSION}" / "bin"


def find_binaries(bin_dir: Path | None = None) -> Binaries:
    """The five binaries, or BinariesMissing naming what is absent and the build command."""
    if bin_dir is None:
        env = os.environ.get("GANGKEEPER_K8S_BIN")
        bin_dir = Path(env) if env else default_bin_dir()
    missing = [c for c in COMPONENTS if not os.access(bin_dir / c, os.X_OK)]
    if missing:
        raise BinariesMissing(
            f"control-plane binaries missing in {bin_dir}: {', '.join(missing)}; "
            f"build them with `{BUILD_COMMAND}` (needs Go; cached, a second run does "
            "nothing) or point GANGKEEPER_K8S_BIN at a directory that has them"
        )
    return Binaries(
        etcd=bin_dir / "etcd",
        kube_apiserver=bin_dir / "kube-apiserver",
        kube_controller_manager=bin_dir / "kube-controller-manager",
        kube_scheduler=bin_dir / "kube-scheduler",
        kubectl=bin_dir / "kubectl",
    )


def find_helm() -> Path:
    """The helm build.sh builds (env `GANGKEEPER_HELM` first), or BinariesMissing."""
    env = os.environ.get("GANGKEEPER_HELM")
    helm = Path(env) if env else cache_root() / f"helm-{HELM_VERSION}" / "bin" / "helm"
    if not os.access(helm, os.X_OK):
        raise BinariesMissing(
            f"helm missing at {helm}; build it with `{BUILD_COMMAND} helm` (needs Go; "
            "cached) or point GANGKEEPER_HELM at a helm v3 binary"
        )
    return helm


def find_cert_manager_crds() -> Path:
    """The CRDs build.sh copies from cert-manager's root module, or BinariesMissing."""
    crds = cache_root() / f"cert-manager-{CERT_MANAGER_VERSION}" / "deploy" / "crds"
    if not (crds / "cert-manager.io_certificates.yaml").is_file():
        raise BinariesMissing(
            f"cert-manager's CRDs missing in {crds}; copy them with "
            f"`{BUILD_COMMAND} cert-manager` (needs Go; cached)"
        )
    return crds


def find_provisioning_request_crd() -> Path:
    """The ProvisioningRequest CRD build.sh copies from cluster-autoscaler's API module,
    or BinariesMissing."""
    crd = (cache_root() / f"provisioning-request-{PROVISIONING_REQUEST_VERSION}" / "config"
           / "crd" / "autoscaling.x-k8s.io_provisioningrequests.yaml")
    if not crd.is_file():
        raise BinariesMissing(
            f"the ProvisioningRequest CRD is missing at {crd}; copy it with "
            f"`{BUILD_COMMAND} provisioning-request` (needs Go; cached)"
        )
    return crd
