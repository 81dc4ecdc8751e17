"""Plain-dict builders for the controller's unit tests: pods and nodes as the API sends them."""

from __future__ import annotations

import json
from typing import Any

from gangkeeper.policies.names import GATE

T0 = 1_800_000_000.0  # a fixed "now" base: 2027-01-15


def stamp(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(
    name: str,
    gpus: int,
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    resource: str = "nvidia.com/gpu",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {"allocatable": {resource: str(gpus), "cpu": "64"}},
    }


def pod(
    name: str,
    gpus: int = 1,
    *,
    namespace: str = "team",
    gang: str | None = None,
    min_member: int | str | None = None,
    gates: tuple[str, ...] | None = None,
    node_name: str = "",
    created: float = T0,
    selector: dict[str, str] | None = None,
    tolerations: list[dict[str, str]] | None = None,
    backend: str | None = None,
    owner: dict[str, str] | None = None,
    phase: str = "Pending",
    deleting: bool = False,
    extra_labels: dict[str, str] | None = None,
    resource: str = "nvidia.com/gpu",
) -> dict[str, Any]:
    """A pod; gang members carry gangkeeper's gate unless `gates` says otherwise."""
    labels: dict[str, str] = dict(extra_labels or {})
    annotations: dict[str, str] = {}
    if gang is not None:
        labels["gangkeeper.io/gang"] = gang
        labels["gangkeeper.io/role"] = "worker"
        annotations["gangkeeper.io/gang-name"] = gang
        if min_member is not None:
            annotations["gangkeeper.io/min-member"] = str(min_member)
        if backend is not None:
            annotations["gangkeeper.io/backend"] = backend
        if owner is not None:
            annotations["gangkeeper.io/owner"] = json.dumps(owner)
        if gates is None:
            gates = (GATE,)
    container: dict[str, Any] = {"name": "main", "image": "trainer"}
    if gpus:
        container["resources"] = {"limits": {resource: str(gpus)}}
    spec: dict[str, Any] = {"containers": [container]}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if node_name:
        spec["nodeName"] = node_name
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "resourceVersion": "1",
        "creationTimestamp": stamp(created),
        "labels": labels,
        "annotations": annotations,
    }
    if deleting:
        metadata["deletionTimestamp"] = stamp(created + 1)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
            "status": {"phase": phase}}


def members(
    gang: str,
    count: int,
    *,
    min_member: int | None = None,
    gpus: int = 1,
    created: float = T0,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """`count` members of one gang (minMember defaults to `count`), one second apart."""
    return [
        pod(
            f"{gang}-{i}",
            gpus,
            gang=gang,
            min_member=count if min_member is None else min_member,
            created=created + i,
            **kwargs,
        )
        for i in range(count)
    ]
