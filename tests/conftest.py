"""Root test configuration: only what the end-to-end tests need at the top.

Registers the gangkeeper sandbox as a pytest-kubernetes provider. pytest-kubernetes
has a fixed list of providers and rejects other names in its own
`pytest_configure`, so `--k8s-provider=sandbox` is rewritten before it runs, and
its `k8s_manager` fixture is overridden to build a `SandboxManager` when the
sandbox is wanted: with `--k8s-provider=sandbox`, or with neither a provider nor a
kubeconfig. `--k8s-provider=kind` or `--k8s-kubeconfig=PATH` use pytest-kubernetes'
own managers (gangkeeper must then be installed in that cluster).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

SANDBOX_PROVIDER = "sandbox"
_WANTS_SANDBOX = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    provider = config.getoption("k8s_provider", default=None)
    kubeconfig = config.getoption("k8s_kubeconfig", default=None) or config.getoption(
        "k8s_kubeconfig_override", default=None
    )
    wants = (provider or "").lower() == SANDBOX_PROVIDER or (not provider and not kubeconfig)
    config.stash[_WANTS_SANDBOX] = wants
    if (provider or "").lower() == SANDBOX_PROVIDER:
        config.option.k8s_provider = None


def wants_sandbox(config: pytest.Config) -> bool:
    """True when the e2e cluster is the local sandbox rather than kind or a kubeconfig."""
    return config.stash.get(_WANTS_SANDBOX, True)


@pytest.fixture(scope="session")
def k8s_manager(request: pytest.FixtureRequest) -> Iterator[Callable[..., type[Any]]]:
    """pytest-kubernetes' manager factory, plus the `sandbox` provider."""
    from pytest_kubernetes.providers import select_provider_manager

    options = {
        "cluster_name": request.config.getoption("k8s_cluster_name"),
        "provider": request.config.getoption("k8s_provider"),
        "version": request.config.getoption("k8s_version"),
        "provider_config": request.config.getoption("k8s_provider_config"),
        "kubeconfig_override": request.config.getoption("k8s_kubeconfig_override"),
        "kubeconfig": request.config.getoption("k8s_kubeconfig"),
    }
    sandbox = wants_sandbox(request.config)

    def factory(provider_name: str | None = None) -> type[Any]:
        if (provider_name or "").lower() == SANDBOX_PROVIDER or (not provider_name and sandbox):
            from support.k8s_provider import SandboxManager

            return SandboxManager
        manager: type[Any] = select_provider_manager(provider_name, options)
        return manager

    yield factory
