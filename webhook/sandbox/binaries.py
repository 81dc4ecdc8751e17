"""Where the control-plane binaries of the sandbox are.

`deploy/sandbox/build.sh` builds etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kubectl (and the neighbours in `neighbours.py`) into a cache
outside the work tree; this module finds the control plane (env
`GANGKEEPER_K8S_BIN` first) and names the build command when it is missing.
Reads the environment and stats files; starts nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: The release pinned in deploy/sandbox/k8s/go.mod; the cache dir is named after it.
K8S_VERSION = "v1.37.2"
BUILD_COMMAND = "deploy/sandbox/build.sh"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


class BinariesMissing(RuntimeError):
    """The control plane has not been built; the message says how to build it."""


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
