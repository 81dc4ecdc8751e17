"""Read what `gangkeeper view` shows from the cluster: live Pods and Nodes (every
namespace: pods anywhere use the GPUs a gang waits for), the Events of the namespace
asked for (or of all), and the ProvisioningRequests where the config asks through them.

It talks through an `Api` (`Rest` on the user's kubeconfig, or `FakeApi` in tests), so
it sees exactly what the user may list. Events the user may not list are left out with
a note, not an error: the rest of the page still answers.

May touch: the API, lists only. Decides nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gangkeeper.policies.settings.config import Config

from ..kube.api import Api, ApiError
from ..kube.informer import list_all, list_readable
from ..kube.resources import BUDGETS
from .state import ViewState, build

#: Pods that hold or wait for capacity (finished ones hold none), as `status` lists them.
LIVE_PODS = [("fieldSelector", "status.phase!=Succeeded,status.phase!=Failed")]
#: cluster-autoscaler's ProvisioningRequests, every namespace.
REQUESTS_PATH = "/apis/autoscaling.x-k8s.io/v1/provisioningrequests"


def reader(
    api: Api, config: Config, namespace: str | None = None,
    clock: Callable[[], float] = time.time,
) -> Callable[[], ViewState]:
    """A callable that reads the cluster once and returns the snapshot; ApiError when
    Pods or Nodes cannot be listed."""

    def read() -> ViewState:
        pods = list_all(api, "/api/v1/pods", LIVE_PODS)
        nodes = list_all(api, "/api/v1/nodes")
        where = f"/namespaces/{namespace}" if namespace else ""
        note = ""
        try:
            events = list_all(api, f"/apis/events.k8s.io/v1{where}/events")
        except ApiError as exc:
            events, note = [], f"cannot list Events: {exc}"
        requests = None
        if config.autoscaling.uses_requests:
            try:
                requests = list_all(api, REQUESTS_PATH)
            except ApiError as exc:
                if exc.status != 404:  # not served: the controller uses placeholders
                    raise
        budgets = list_readable(api, BUDGETS.path)
        return build(pods, nodes, config, clock(), namespace=namespace, events=events,
                     requests=requests, events_note=note, budgets=budgets)

    return read
