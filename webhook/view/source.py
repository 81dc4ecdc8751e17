"""Read what `gangkeeper view` shows from the cluster: live Pods and Nodes (every
namespace: pods anywhere use the GPUs a gang waits for), the Events of the namespace
asked for (or of all), the ProvisioningRequests where the config asks through them,
and the DRA objects that give Nodes and pods their devices.

It talks through an `Api` (`Rest` on the user's kubeconfig, or `FakeApi` in tests), so
it sees exactly what the user may list. What the user may not list is left out with a
note, not an error, wherever the rest of the page can still answer:

- Events: the gang page says why there are none.
- Pods of every namespace (a Role in some namespaces, no ClusterRole): the pods are
  read namespace by namespace (`kube.live_pods`, as `status` and `explain` read them);
  those refused are named on every page (their gangs are not shown, and the GPUs their
  pods hold look free). A user who may list neither every pod nor the Namespaces is
  told to name one (`-n`).
- DRA objects (resource.k8s.io/v1): where published and readable, Nodes get their
  classes' devices and pods ask their claims' devices, as `status` and `explain` read
  them (`kube.device_state`); what this user may not list of them is named on every
  page, and the devices (or claims) are then not counted. A cluster that does not
  serve resource.k8s.io/v1 publishes no device: nothing is said.

May touch: the API, lists only. Decides nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from gangkeeper.policies.settings.config import Config

from ..kube.api import Api, ApiError
from ..kube.device_state import read_devices
from ..kube.informer import list_all, list_readable
from ..kube.live_pods import list_live_pods
from ..kube.resources import BUDGETS
from .state import ViewState, build

#: cluster-autoscaler's ProvisioningRequests, every namespace.
REQUESTS_PATH = "/apis/autoscaling.x-k8s.io/v1/provisioningrequests"
EVENTS = "/apis/events.k8s.io/v1"


def reader(
    api: Api, config: Config, namespace: str | None = None,
    clock: Callable[[], float] = time.time,
    aggregate_above: int = 200,
) -> Callable[[], ViewState]:
    """A callable that reads the cluster once and returns the snapshot; ApiError when
    Nodes cannot be listed (or DRA objects, but for 403 and 404), ClusterStateError
    when no Pods can be. `aggregate_above`: the fleet page sums per node shape above
    this many nodes."""

    def read() -> ViewState:
        nodes = list_all(api, "/api/v1/nodes")
        listed = list_live_pods(api, namespace, "gangkeeper view")
        pods, readable = listed.pods, listed.namespaces
        if readable is None or namespace:
            wheres = [f"/namespaces/{namespace}" if namespace else ""]
        else:
            wheres = [f"/namespaces/{ns}" for ns in readable]
        events: list[Mapping[str, Any]] = []
        note = ""
        try:
            for where in wheres:
                events += list_all(api, f"{EVENTS}{where}/events")
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
        devices = read_devices(api, nodes, config.pools)
        return build(devices.pods(pods), devices.nodes, devices.config(config), clock(),
                     namespace=namespace, events=events, requests=requests,
                     events_note=note, budgets=budgets, notes=(*listed.notes, *devices.notes),
                     aggregate_above=aggregate_above)

    return read
