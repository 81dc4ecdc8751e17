"""Building a kubernetes `ApiClient` from a kubeconfig file or the in-cluster config.

`api_client(kubeconfig)` is what commands call when they need the API: an explicit
path (or a `context` of a kubeconfig, as kubectl's `--context`) wins, then the
in-cluster service account, then the default kubeconfig (`$KUBECONFIG` or
`~/.kube/config`). `serve_client(kubeconfig)` is stricter: the
server talks to a cluster only when given a kubeconfig or when running in a pod, so
`gangkeeper serve` on a laptop never picks up whatever context kubectl points at.

Reads kubeconfig / service-account files; makes no API calls itself.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kubernetes import client, config

from gangkeeper.policies.errors import KubeconfigError as KubeconfigError

_SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def in_cluster() -> bool:
    """True inside a pod with a mounted service-account token."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and _SERVICE_ACCOUNT_TOKEN.is_file()


def _from_file(path: str | None, context: str | None = None) -> Any:
    try:
        return config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=path, context=context
        )
    except (config.ConfigException, OSError) as exc:
        where = path or os.environ.get("KUBECONFIG") or "~/.kube/config"
        of = f" (context {context})" if context else ""
        raise KubeconfigError(f"cannot load kubeconfig {where}{of}: {exc}") from exc


def _in_cluster() -> Any:
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException as exc:
        raise KubeconfigError(f"cannot load in-cluster config: {exc}") from exc
    return client.ApiClient(configuration)


def api_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A client for the cluster: explicit kubeconfig or context, else in-cluster, else
    the default file."""
    if kubeconfig or context:
        return _from_file(kubeconfig or None, context)
    if in_cluster():
        return _in_cluster()
    return _from_file(None)


def serve_client(kubeconfig: str | None, context: str | None = None) -> Any:
    """The server's client, or None when it should run on a nodes file (no cluster)."""
    if kubeconfig or context:
        return _from_file(kubeconfig or None, context)
    if in_cluster():
        return _in_cluster()
    return None
