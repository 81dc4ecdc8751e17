"""Fake GPU Nodes the real kube-scheduler binds pods to.

There is no kubelet: a Node object with GPUs in status.capacity/allocatable and a
Ready condition is all the scheduler looks at. Creating one takes two writes (the
object, then its status subresource, because status in a create is dropped). No
node-lifecycle controller runs in the sandbox, so nothing later marks these nodes
unreachable; on a real cluster the node-lifecycle controller does so after its grace
period, which is long enough for a test.

Talks to the API server through a kubernetes `CoreV1Api` it is given; never reads
files or starts processes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

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


def _ready_status(node: Mapping[str, Any]) -> dict[str, Any]:
    status = node.get("status") or {}
    capacity = dict(status.get("capacity") or BASE_CAPACITY)
    allocatable = dict(status.get("allocatable") or capacity)
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


def create_nodes(core: Any, nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """Create each Node, make it Ready with its capacity, and return the names.

    `core` is a kubernetes `CoreV1Api`. Taints and labels come from the manifest;
    conditions are always replaced by a fresh Ready one.
    """
    names: list[str] = []
    for node in nodes:
        meta = node.get("metadata") or {}
        spec = dict(node.get("spec") or {})
        name = str(meta["name"])
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": dict(meta.get("labels") or {}),
                "annotations": dict(meta.get("annotations") or {}),
            },
            "spec": {k: v for k, v in spec.items() if k in ("taints", "unschedulable")},
        }
        core.create_node(body)
        core.patch_node_status(name, {"status": _ready_status(node)})
        created = core.read_node(name)
        taints = created.spec.taints or []
        if any(t.key == NOT_READY_TAINT for t in taints):
            wanted = [
                {"key": t.key, "value": t.value, "effect": t.effect}
                for t in taints
                if t.key != NOT_READY_TAINT
            ]
            core.patch_node(name, {"spec": {"taints": wanted}})
        names.append(name)
    return names


def delete_nodes(core: Any, names: Iterable[str]) -> None:
    """Delete the named Nodes; ones already gone are fine."""
    from kubernetes.client.exceptions import ApiException

    for name in names:
        try:
            core.delete_node(name)
        except ApiException as e:
            if e.status != 404:
                raise
