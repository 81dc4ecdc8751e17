"""GPU Nodes of the sandbox, which kwok plays the kubelet of.

A Node is created with its capacity in its status (a Node keeps the status it is
created with) and kwok's annotation; kwok then makes it Ready, renews its Lease and
runs the pods bound to it (`neighbours.py`, `data/kwok-stages.yaml`). With
`kwok=False` the Node is made Ready here instead (a second write, to its status
subresource), and pods bound to it never start: the control plane alone.

No node-lifecycle controller runs in the sandbox, so nothing marks these nodes
unreachable; on a real cluster it does so after its grace period.

Talks to the API server through a kubernetes `CoreV1Api` it is given; never reads
files or starts processes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .neighbours import KWOK_NODE_ANNOTATION

#: The taint the TaintNodesByCondition admission plugin puts on every new Node until
#: the node-lifecycle controller sees it Ready; without that controller it must go.
NOT_READY_TAINT = "node.kubernetes.io/not-ready"

#: What a node offers besides GPUs: generous, so only GPUs ever decide placement.
BASE_CAPACITY: Mapping[str, str] = {
    "cpu": "128",
    "memory": "1Ti",
    "pods": "110",
    "ephemeral-storage": "1Ti",
}


def gpu_node(
    name: str,
    gpus: int,
    *,
    resource: str = "nvidia.com/gpu",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """A Node manifest with `gpus` of `resource` and the usual well-known labels."""
    capacity = {**BASE_CAPACITY, resource: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
        },
        "spec": {"taints": [dict(t) for t in taints or ()]},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def _capacity_status(node: Mapping[str, Any]) -> dict[str, Any]:
    status = node.get("status") or {}
    capacity = dict(status.get("capacity") or BASE_CAPACITY)
    allocatable = dict(status.get("allocatable") or capacity)
    # kwok schedules nothing on a node without a pod count; the fleet may omit it.
    capacity.setdefault("pods", BASE_CAPACITY["pods"])
    allocatable.setdefault("pods", capacity["pods"])
    return {"capacity": capacity, "allocatable": allocatable}


def _ready_status(node: Mapping[str, Any]) -> dict[str, Any]:
    status = _capacity_status(node)
    capacity = status["capacity"]
    allocatable = status["allocatable"]
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "capacity": capacity,
        "allocatable": allocatable,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "GangkeeperSandbox",
                "message": "fake node of the gangkeeper sandbox (no kubelet)",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        ],
    }


def fleet_of(count: int, gpus: int = 8, *, prefix: str = "gpu") -> list[dict[str, Any]]:
    """`count` identical GPU Nodes (`sandbox up --nodes N`, scale work)."""
    width = len(str(max(count - 1, 0)))
    return [gpu_node(f"{prefix}-{i:0{width}d}", gpus) for i in range(count)]


def create_nodes(
    core: Any, nodes: Iterable[Mapping[str, Any]], *, kwok: bool = True, workers: int = 8
) -> list[str]:
    """Create each Node with its capacity and return the names, in input order.

    `core` is a kubernetes `CoreV1Api`. Taints and labels come from the manifest.
    With `kwok`, the Node carries kwok's annotation and kwok makes it Ready; without,
    its conditions are replaced by a fresh Ready one here. Nodes are created by
    `workers` threads: thousands of them take seconds, not minutes.
    """
    manifests = list(nodes)
    if len(manifests) <= 1 or workers <= 1:
        return [_create_node(core, node, kwok=kwok) for node in manifests]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda node: _create_node(core, node, kwok=kwok), manifests))


def _create_node(core: Any, node: Mapping[str, Any], *, kwok: bool) -> str:
    meta = node.get("metadata") or {}
    spec = dict(node.get("spec") or {})
    name = str(meta["name"])
    annotations = dict(meta.get("annotations") or {})
    if kwok:
        key, value = KWOK_NODE_ANNOTATION
        annotations[key] = value
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": dict(meta.get("labels") or {}),
            "annotations": annotations,
        },
        "spec": {k: v for k, v in spec.items() if k in ("taints", "unschedulable")},
    }
    if kwok:
        # One write: a Node keeps the status it is created with, so kwok and every
        # watcher see its capacity from the first event on.
        body["status"] = _capacity_status(node)
    created = core.create_node(body)
    if not kwok:
        core.patch_node_status(name, {"status": _ready_status(node)})
    taints = created.spec.taints or []
    if any(t.key == NOT_READY_TAINT for t in taints):
        wanted = [
            {"key": t.key, "value": t.value, "effect": t.effect}
            for t in taints
            if t.key != NOT_READY_TAINT
        ]
        core.patch_node(name, {"spec": {"taints": wanted}})
    return name


def nodes_ready(core: Any, names: Iterable[str]) -> list[str]:
    """Which of `names` are not Ready yet (kwok has not initialised them)."""
    wanted = set(names)
    ready = {
        n.metadata.name
        for n in core.list_node().items
        if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or ())
    }
    return sorted(wanted - ready)


def delete_nodes(core: Any, names: Iterable[str]) -> None:
    """Delete the named Nodes; ones already gone are fine."""
    from kubernetes.client.exceptions import ApiException

    for name in names:
        try:
            core.delete_node(name)
        except ApiException as e:
            if e.status != 404:
                raise
