"""A pytest-kubernetes provider whose cluster is a gangkeeper sandbox.

pytest-kubernetes knows kind, k3d, minikube and external kubeconfigs; it has no
plugin hook for more, so `tests/conftest.py` routes the provider name `sandbox`
(and the default, when neither a provider nor a kubeconfig is given) to
`SandboxManager` by overriding its `k8s_manager` fixture. The manager behaves like
the others: `create()` brings the sandbox up, `kubeconfig` points at it, `delete()`
tears it down; `sandbox` gives tests the processes (to stop gangkeeper, say).

Imports pytest-kubernetes, a test dependency, so it lives under tests/ and stays out
of the wheel.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pytest_kubernetes.kubectl import Kubectl
from pytest_kubernetes.options import ClusterOptions
from pytest_kubernetes.providers.base import AClusterManager

from gangkeeper.webhook.sandbox.binaries import find_binaries
from gangkeeper.webhook.sandbox.sandbox import DEFAULT_FEATURE_GATES, DEFAULT_FLEET, Sandbox

PROVIDER_NAME = "sandbox"


class _SandboxKubectl(Kubectl):  # type: ignore[misc]
    """pytest-kubernetes' kubectl wrapper, pointed at the sandbox's own kubectl
    (it is not on PATH: build.sh installs into a cache dir)."""

    def __init__(self, kubectl: Path, kubeconfig: Path | None) -> None:
        super().__init__(kubeconfig)
        self._kubectl = kubectl

    @property
    def _exec_path(self) -> Path:
        return self._kubectl


class SandboxManager(AClusterManager):  # type: ignore[misc]
    """pytest-kubernetes cluster manager for `gangkeeper.webhook.sandbox.Sandbox`.

    `create(directory=, fleet=, backend=, config=, feature_gates=)` passes those through
    to `Sandbox.up`; without `directory` a fresh temporary one is used, without
    `fleet` the sample fleet (`fleet=None`: no nodes).
    """

    sandbox: Sandbox | None = None

    @classmethod
    def get_binary_name(cls) -> str:
        return "kube-apiserver"

    def _ensure_executable(self) -> None:
        # Raises BinariesMissing naming deploy/sandbox/build.sh.
        find_binaries()

    def _on_create(self, cluster_options: ClusterOptions, **kwargs: Any) -> None:
        directory = kwargs.get("directory") or tempfile.mkdtemp(
            prefix=f"gangkeeper-{self.cluster_name}-"
        )
        placeholder = cluster_options.kubeconfig_path
        self.sandbox = Sandbox(
            Path(directory), feature_gates=kwargs.get("feature_gates", DEFAULT_FEATURE_GATES)
        )
        info = self.sandbox.up(
            fleet=kwargs.get("fleet", DEFAULT_FLEET),
            backend=kwargs.get("backend"),
            config=kwargs.get("config"),
        )
        cluster_options.kubeconfig_path = info.kubeconfig
        # create() made an empty temp file to hold a kubeconfig; ours lives in the dir.
        if placeholder is not None and Path(placeholder) != info.kubeconfig:
            path = Path(placeholder)
            if path.is_file() and path.stat().st_size == 0:
                path.unlink()

    def _on_delete(self) -> None:
        if self.sandbox is not None:
            self.sandbox.down()
            self.sandbox = None

    def ready(self, timeout: int = 20) -> bool:
        # Sandbox.up already waited for /readyz, the default ServiceAccount and
        # gangkeeper; a sandbox this manager did not start is never "ready".
        return self.sandbox is not None and self.sandbox.running()

    def kubectl(self, args: list[str], as_dict: bool = True, timeout: int = 60) -> Any:
        kubectl = find_binaries().kubectl
        return _SandboxKubectl(kubectl, self.kubeconfig)(args, as_dict, timeout)

    def load_image(self, image: str) -> None:
        raise NotImplementedError(
            "the gangkeeper sandbox runs no kubelet or container runtime; images are never pulled"
        )
