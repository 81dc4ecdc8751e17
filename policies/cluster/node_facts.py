"""Reading a Node: the one place its name, labels, taints, cordon and GPUs are parsed.

`read_node(node, config)` checks every field it reads and raises InvalidObject naming
the node and field; the capacity (admission), the controller's fleet and its
ingestion all read Nodes through here, so they agree on what a node offers.
`node_fields` is the reduced copy the controller keeps of a Node.

Pure: plain dicts in, frozen dataclasses out.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from math import floor
from typing import Any

from ..errors import InvalidObject
from ..model import HELD_BY_CLAIMS, KubeObject, Taint
from ..podspec import as_list, as_mapping, as_str, field_path, resource_amount
from ..quantity import parse_quantity
from ..settings.config import Config

#: The taint the scheduler's NodeUnschedulable filter treats a cordoned node as having.
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")

#: Taints that describe a passing condition of a node, not what the node is for.
#: Ignored by the "ever" view: a restarting or draining node comes back.
TRANSIENT_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/network-unavailable",
        "node.kubernetes.io/out-of-service",
        "node.cloudprovider.kubernetes.io/uninitialized",
        "ToBeDeletedByClusterAutoscaler",
        "DeletionCandidateOfClusterAutoscaler",
        "karpenter.sh/disrupted",
        "karpenter.sh/disruption",
    }
)

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True)
class NodeFacts:
    """The parts of a Node that decide where a pod may go and how many GPUs it offers."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    #: Allocatable of each GPU resource the config names, whole units, only those > 0.
    gpus: Mapping[str, int]
    #: Allocatable of every resource, in placement's units (`podspec.resource_amount`:
    #: millicores, bytes, whole GPUs); a non-GPU amount that cannot be read is left out.
    allocatable: Mapping[str, int] = field(default_factory=dict)
    #: The Ready condition is True, or the Node reports no Ready condition at all.
    ready: bool = True
    #: GPUs that allocated ResourceClaims take with no bound pod counting them
    #: (`model.HELD_BY_CLAIMS`): not free now, still offered for "could ever run".
    held: Mapping[str, int] = field(default_factory=dict)

    @property
    def scheduling_taints(self) -> tuple[Taint, ...]:
        """The taints as the scheduler applies them now: a cordon is one more."""
        return (*self.taints, UNSCHEDULABLE_TAINT) if self.unschedulable else self.taints


def read_node(node: KubeObject, config: Config) -> NodeFacts:
    """The facts of a Node dict; InvalidObject (naming node and field) when malformed."""
    meta = as_mapping(
        node.get("metadata") if isinstance(node, Mapping) else None,
        "Node.metadata",
        required=True,
    )
    name = as_str(meta.get("name"), "Node.metadata.name")
    where = f"Node {name}"
    labels_path = f"{where}: metadata.labels"
    labels = {
        as_str(k, labels_path): as_str(v, field_path(labels_path, str(k)))
        for k, v in as_mapping(meta.get("labels"), labels_path).items()
    }
    spec = as_mapping(node.get("spec"), f"{where}: spec")
    taints_path = f"{where}: spec.taints"
    taints = []
    for i, raw in enumerate(as_list(spec.get("taints"), taints_path)):
        path = field_path(taints_path, i)
        body = as_mapping(raw, path, required=True)
        effect = as_str(body.get("effect"), field_path(path, "effect"))
        if effect not in _EFFECTS:
            raise InvalidObject(
                field_path(path, "effect"),
                f"must be one of {', '.join(_EFFECTS)}, got {effect!r}",
            )
        taints.append(
            Taint(
                key=as_str(body.get("key"), field_path(path, "key")),
                value=as_str(body.get("value"), field_path(path, "value"), default=""),
                effect=effect,
            )
        )
    unschedulable = spec.get("unschedulable", False)
    if unschedulable is None:
        unschedulable = False
    if not isinstance(unschedulable, bool):
        raise InvalidObject(
            f"{where}: spec.unschedulable", f"must be true or false, got {unschedulable!r}"
        )
    status = as_mapping(node.get("status"), f"{where}: status")
    alloc_path = f"{where}: status.allocatable"
    gpus: dict[str, int] = {}
    allocatable: dict[str, int] = {}
    for resource, raw_amount in as_mapping(status.get("allocatable"), alloc_path).items():
        if not isinstance(resource, str):
            continue
        if not config.is_gpu_resource(resource):
            # Admission never read these; an odd one must not hide the node.
            with suppress(InvalidObject):
                allocatable[resource] = resource_amount(resource, raw_amount, alloc_path, config)
            continue
        path = field_path(alloc_path, resource)
        amount = parse_quantity(raw_amount, path)
        if amount < 0:
            raise InvalidObject(path, f"cannot be negative, got {raw_amount!r}")
        # A pod's whole-GPU request fits while it is ≤ allocatable, so a fractional
        # allocatable offers its floor.
        if floor(amount) > 0:
            gpus[resource] = floor(amount)
    allocatable.update(gpus)
    held_path = f"{where}: status.{HELD_BY_CLAIMS}"
    held = {
        as_str(r, held_path): min(gpus.get(r, 0), _count(n, field_path(held_path, str(r))))
        for r, n in as_mapping(status.get(HELD_BY_CLAIMS), held_path).items()
    }
    return NodeFacts(
        name, labels, tuple(taints), unschedulable, gpus, allocatable, _ready(status),
        {r: n for r, n in held.items() if n > 0},
    )


def _count(value: object, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidObject(path, f"must be a whole number, got {value!r}")
    return value


def _ready(status: Mapping[str, Any]) -> bool:
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return True
    for condition in conditions:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return True


def node_fields(node: Mapping[str, Any]) -> dict[str, Any] | None:
    """The parts of a Node `read_node` reads, or None when it lists no allocatable.

    A real Node carries images, conditions and managedFields worth kilobytes; the
    controller's planning needs name, labels, taints, cordon and allocatable. Nodes
    without GPUs are kept too: a gang whose members ask no GPUs is placed on them
    (docs/performance.md has what that costs).
    """
    status = node.get("status")
    allocatable = status.get("allocatable") if isinstance(status, Mapping) else None
    if not isinstance(allocatable, Mapping) or not allocatable:
        return None
    meta = node.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    spec = node.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    slim_meta: dict[str, Any] = {"name": meta.get("name"), "labels": meta.get("labels") or {}}
    slim_spec: dict[str, Any] = {}
    for key in ("taints", "unschedulable"):
        if key in spec:
            slim_spec[key] = spec[key]
    slim_status: dict[str, Any] = {"allocatable": allocatable}
    if isinstance(status, Mapping) and HELD_BY_CLAIMS in status:
        slim_status[HELD_BY_CLAIMS] = status[HELD_BY_CLAIMS]
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    if isinstance(conditions, list):
        # Only Ready is read (placement never picks a NotReady node); the heartbeat
        # times it carries change every few seconds, so they are dropped.
        ready = [
            {"type": "Ready", "status": c.get("status")}
            for c in conditions
            if isinstance(c, Mapping) and c.get("type") == "Ready"
        ]
        if ready:
            slim_status["conditions"] = ready
    return {"metadata": slim_meta, "spec": slim_spec, "status": slim_status}
