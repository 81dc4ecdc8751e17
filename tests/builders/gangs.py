"""Plain-dict builders for the controller's unit tests: pods and nodes as the API sends them."""

from __future__ import annotations

import json
from typing import Any

from gangkeeper.policies.names import GATE, PIN_LABEL, RELEASED_AT_ANNOTATION

T0 = 1_800_000_000.0  # a fixed "now" base: 2027-01-15

#: Top-level owners of gangs (`members(..., owner=...)`), one per kind the watchdog
#: treats differently: Job, JobSet and TrainJob are suspended; LeaderWorkerSet (no
#: `spec.suspend`) has its pods deleted for it to recreate.
JOB = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid"}
JOBSET = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js",
          "uid": "js-uid"}
TRAINJOB = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "tj",
            "uid": "tj-uid"}
LWS = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": "lws",
       "uid": "lws-uid"}
RAYCLUSTER = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": "rc-uid"}


def owner_object(owner: dict[str, str], **labels: str) -> dict[str, Any]:
    """The owner itself in namespace team: suspended when it carries `labels` (as
    gangkeeper leaves it), running otherwise."""
    meta: dict[str, Any] = {"name": owner["name"], "namespace": "team", "uid": owner["uid"]}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "metadata": meta,
            "spec": {"suspend": bool(labels)}}


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
        "status": {
            "allocatable": {resource: str(gpus), "cpu": "64", "memory": "512Gi", "pods": "110"}
        },
    }


def plain_node(
    name: str,
    *,
    cpu: str = "8",
    memory: str = "300Mi",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A node without GPUs (allocatable cpu, memory and 110 pods)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


def requesting(pods: list[dict[str, Any]], **requests: str) -> list[dict[str, Any]]:
    """The pods with these requests (memory="100Mi", cpu="2") on their container."""
    for raw in pods:
        resources = raw["spec"]["containers"][0].setdefault("resources", {})
        resources.setdefault("requests", {}).update(
            {k.replace("_", "-"): v for k, v in requests.items()}
        )
    return pods


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


def pin(raw: dict[str, Any], node: str, *, hostname: bool = False) -> dict[str, Any]:
    """The pod pinned to `node` as the controller's patch leaves a pod without affinity
    (required node affinity `matchFields: metadata.name In [node]`); with `hostname`,
    as versions before that pinned it (`nodeSelector: kubernetes.io/hostname`)."""
    spec = raw["spec"]
    if hostname:
        spec.setdefault("nodeSelector", {})[PIN_LABEL] = node
    else:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    return raw


def released(
    count: int, *, bound: int, released_at: float = T0, ready: bool = False,
    hostname: bool = False, tried: bool = True, **kwargs: Any
) -> list[dict[str, Any]]:
    """A gang `g` of `count` 4-GPU members released pinned at `released_at` (member i
    to node n{i}; `hostname`: the way earlier versions pinned), the first `bound` of
    them bound there (Running, Ready or not). The others, with `tried`, the scheduler
    found no room for (PodScheduled False, Unschedulable); without, it has not come
    to them yet (the SchedulingGated condition of their creation stays)."""
    from gangkeeper.webhook.controller.writes import rfc3339

    pods = members("g", count, gates=(), gpus=4, **kwargs)
    for i, raw in enumerate(pods):
        pin(raw, f"n{i}", hostname=hostname)
        raw["metadata"]["annotations"][RELEASED_AT_ANNOTATION] = rfc3339(released_at)
        if i < bound:
            raw["spec"]["nodeName"] = f"n{i}"
            raw["status"] = {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True" if ready else "False"}]}
        else:
            raw["status"] = {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False",
                 "reason": "Unschedulable" if tried else "SchedulingGated"}]}
    return pods
