"""Read what `gangkeeper view` shows from the cluster: live Pods and Nodes (every
namespace: pods anywhere use the GPUs a gang waits for), the Events of the namespace
asked for (or of all), and the ProvisioningRequests where the config asks through them.

It talks through an `Api` (`Rest` on the user's kubeconfig, or `FakeApi` in tests), so
it sees exactly what the user may list. What the user may not list is left out with a
note, not an error, wherever the rest of the page can still answer:

- Events: the gang page says why there are none.
- Pods of every namespace (a Role in some namespaces, no ClusterRole): the pods are
  read namespace by namespace, of `namespace` alone when one is asked, else of every
  Namespace listed; those refused are named on every page (their gangs are not shown,
  and the GPUs their pods hold look free). A user who may list neither every pod nor
  the Namespaces is told to name one (`-n`).

May touch: the API, lists only. Decides nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gangkeeper.policies.errors import ClusterStateError
from gangkeeper.policies.settings.config import Config

from ..kube.api import Api, ApiError, Forbidden
from ..kube.informer import list_all, list_readable
from ..kube.resources import BUDGETS
from .state import ViewState, build

#: Pods that hold or wait for capacity (finished ones hold none), as `status` lists them.
LIVE_PODS = [("fieldSelector", "status.phase!=Succeeded,status.phase!=Failed")]
#: cluster-autoscaler's ProvisioningRequests, every namespace.
REQUESTS_PATH = "/apis/autoscaling.x-k8s.io/v1/provisioningrequests"
EVENTS = "/apis/events.k8s.io/v1"


def reader(
    api: Api, config: Config, namespace: str | None = None,
    clock: Callable[[], float] = time.time,
) -> Callable[[], ViewState]:
    """A callable that reads the cluster once and returns the snapshot; ApiError when
    Nodes cannot be listed, ClusterStateError when no Pods can be."""

    def read() -> ViewState:
        nodes = list_all(api, "/api/v1/nodes")
        pods, readable, notes = _pods(api, namespace)
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
        return build(pods, nodes, config, clock(), namespace=namespace, events=events,
                     requests=requests, events_note=note, budgets=budgets, notes=notes)

    return read


def _pods(
    api: Api, namespace: str | None,
) -> tuple[list[Mapping[str, Any]], Sequence[str] | None, tuple[str, ...]]:
    """The live pods this user may list, the namespaces they were read from (None:
    every one, in one list) and what could not be read, said for the page."""
    try:
        return list_all(api, "/api/v1/pods", LIVE_PODS), None, ()
    except Forbidden as exc:
        everywhere = exc
    if namespace:
        candidates = [namespace]
    else:
        try:
            candidates = sorted(
                str(ns["metadata"]["name"]) for ns in list_all(api, "/api/v1/namespaces")
            )
        except Forbidden as exc:
            raise ClusterStateError(
                f"cannot list Pods of every namespace ({everywhere}) nor the Namespaces "
                f"({exc}): run `gangkeeper view -n NAMESPACE` with a namespace you may read"
            ) from exc
    pods: list[Mapping[str, Any]] = []
    readable: list[str] = []
    refused: list[str] = []
    for ns in candidates:
        try:
            pods += list_all(api, f"/api/v1/namespaces/{ns}/pods", LIVE_PODS)
            readable.append(ns)
        except Forbidden:
            refused.append(ns)
    notes: list[str] = []
    if refused:
        which = "namespace" if len(refused) == 1 else "namespaces"
        notes.append(
            f"cannot list Pods in {which} {', '.join(refused)} (forbidden): "
            "their gangs are not shown, and the GPUs their pods hold count as free"
        )
    if namespace and readable:
        notes.append(
            f"cannot list Pods of every namespace ({everywhere}): only {namespace}'s are "
            "counted, and the GPUs pods of other namespaces hold count as free"
        )
    return pods, readable, tuple(notes)
