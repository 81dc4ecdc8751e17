"""Helpers of the deploy tests (a module of its own: conftest modules cannot be imported)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from builders import polling
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]


def run_kubectl(
    kubectl: Path, *args: str, kubeconfig: Path | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    argv = [str(kubectl), *([f"--kubeconfig={kubeconfig}"] if kubeconfig else []), *args]
    return subprocess.run(
        argv, check=False, input=input, capture_output=True, text=True, timeout=120
    )


@dataclass
class ControlPlane:
    kubeconfig: Path
    kubectl_bin: Path
    api_client: Any

    def kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        done = run_kubectl(self.kubectl_bin, *args, kubeconfig=self.kubeconfig, input=input)
        if done.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {done.returncode}:\n{done.stderr}"
            )
        return done

    def client_as(self, user: str) -> Any:
        """An ApiClient that impersonates `user` (the admin may impersonate anyone)."""
        api = kube_config.new_client_from_config(config_file=str(self.kubeconfig))
        api.set_default_header("Impersonate-User", user)
        return api

    @staticmethod
    def wait_for(predicate: Callable[[], T], timeout: float = 60.0, message: str = "") -> T:
        return polling.wait_for(predicate, timeout, message=message)

    def namespace(self, name: str, labels: dict[str, str]) -> str:
        core = client.CoreV1Api(self.api_client)
        core.create_namespace({"metadata": {"name": name, "labels": labels}})

        def has_default_sa() -> bool:
            try:
                core.read_namespaced_service_account("default", name)
            except ApiException as exc:
                if exc.status == 404:
                    return False
                raise
            return True

        # The ServiceAccount admission plugin refuses pods until `default` exists.
        self.wait_for(has_default_sa, message=f"ServiceAccount {name}/default")
        return name
