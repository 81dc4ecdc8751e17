"""Fixtures of the deploy tests: kubectl, helm, and a real API server to install into.

`kubectl` is the sandbox's own build (`deploy/sandbox/build.sh`); `control_plane` is a
sandbox started without gangkeeper (real etcd, kube-apiserver, kube-controller-manager,
kube-scheduler), so `kubectl apply -k deploy/` runs against the real admission chain:
CEL match conditions are compiled, Pod Security is enforced, RBAC is evaluated. Nothing
here mocks the API server. Without the binaries the tests skip with a reason naming the
build script; `GANGKEEPER_E2E=require` turns that into a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest
from deploy_support import ControlPlane
from kubernetes import config as kube_config

from gangkeeper.webhook.sandbox import (
    BUILD_COMMAND,
    BinariesMissing,
    Sandbox,
    find_binaries,
    find_helm,
)


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("GANGKEEPER_E2E", "").lower() == "require":
        pytest.fail(f"GANGKEEPER_E2E=require: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def kubectl_bin() -> Path:
    try:
        return find_binaries().kubectl
    except BinariesMissing as exc:
        _unavailable(f"{exc} (build: {BUILD_COMMAND})")


@pytest.fixture(scope="session")
def helm_bin() -> Path:
    """The helm v3 build.sh builds (`deploy/sandbox/build.sh helm`)."""
    try:
        return find_helm()
    except BinariesMissing as exc:
        _unavailable(str(exc))


DEPLOY_DIR = Path(__file__).parent
_running: list[Sandbox] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Stop the control plane after the last deploy test, not at the end of the session,
    so it does not run alongside the end-to-end tests' own sandbox on a 2-core machine.
    A wrapper: the module fixtures' own teardown (which still talks to it) runs first."""
    yield
    if nextitem is None or DEPLOY_DIR not in Path(str(nextitem.fspath)).parents:
        while _running:
            _running.pop().down()


@pytest.fixture(scope="session")
def control_plane(
    kubectl_bin: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    sandbox = Sandbox(tmp_path_factory.mktemp("deploy-sandbox"))
    try:
        info = sandbox.up(fleet=None, gangkeeper=False)
    except BinariesMissing as exc:
        _unavailable(f"{exc} (build: {BUILD_COMMAND})")
    _running.append(sandbox)
    api = kube_config.new_client_from_config(config_file=str(info.kubeconfig))
    try:
        yield ControlPlane(info.kubeconfig, kubectl_bin, api)
    finally:
        api.close()
        if sandbox in _running:
            _running.remove(sandbox)
            sandbox.down()
