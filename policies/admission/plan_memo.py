"""Mutation plans and their JSONPatches, remembered per pod shape.

Every worker pod of a gang is planned alike: planning (`plan_pod`) and the patch
(`MutationPlan.json_patch`) read only the gang, the role, the namespace's backend and a
few parts of the pod. `shape_key` reads exactly those parts:

- the labels and annotations (every key and value, in order: another gang system's
  keys refuse the pod, present keys are never added again);
- `spec.schedulerName`, `spec.nodeName`, whether `spec.workloadRef` is set;
- of `spec.schedulingGates`: how many there are and whether ours is among them (the
  patch appends at the list's end);
- `spec.schedulingGroup`: whether it is set and its podGroupName;
- of the gang: name, minMember, source and its later roles (`Role.later`).

Two pods with equal keys get equal plans and equal patches, so the second is answered
from memory. A pod with any of those parts of an unusual type (metadata or spec not a
map, a label value that is not hashable, ...) gets no key and is planned afresh. The
property tests feed arbitrary sequences of pods through the memo and compare every
answer with fresh planning.

Pure memory: a `BoundedMemo` (4,096 shapes unless told otherwise), owned by whoever
decides (the server's `decision.Memos`). Answers are shared: read only.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from ..memo import BoundedMemo
from ..model import KubeObject, PodMembership
from ..settings.config import Config
from .mutation import MutationPlan, has_gate, plan_pod

#: Marks a part that is absent (None is a value a pod may carry).
_ABSENT: Hashable = object()
#: Marks a part of a type the key does not cover: the pod is planned afresh.
_UNUSUAL: Hashable = object()


def _items(value: object) -> Hashable:
    """The map's items in order (or _ABSENT, or _UNUSUAL).

    In order, because a refusal names the keys it found in the pod's order; the API
    server sends maps with sorted keys, so pods of one template still share a key.
    """
    if value is _ABSENT:
        return _ABSENT
    if type(value) is not dict:
        return _UNUSUAL
    items = tuple(value.items())
    try:
        hash(items)
    except TypeError:  # a value that is a list or a map
        return _UNUSUAL
    return items


def _scalar(value: object) -> Hashable:
    return value if value is _ABSENT or value is None or type(value) is str else _UNUSUAL


def shape_key(
    pod: KubeObject, membership: PodMembership, config: Config, namespace: str
) -> tuple[Hashable, ...] | None:
    """Everything planning reads (see the module docstring), or None: plan afresh."""
    metadata = pod.get("metadata", _ABSENT)
    spec = pod.get("spec", _ABSENT)
    if type(metadata) is not dict or type(spec) is not dict:
        return None
    labels = _items(metadata.get("labels", _ABSENT))
    annotations = _items(metadata.get("annotations", _ABSENT))
    scheduler = _scalar(spec.get("schedulerName", _ABSENT))
    node = _scalar(spec.get("nodeName", _ABSENT))
    if any(part is _UNUSUAL for part in (labels, annotations, scheduler, node)):
        return None
    gates = spec.get("schedulingGates", _ABSENT)
    if gates is _ABSENT:
        gates_key: Hashable = _ABSENT
    elif type(gates) is list:
        gates_key = (len(gates), has_gate(gates))
    else:
        return None
    group = spec.get("schedulingGroup", _ABSENT)
    if group is _ABSENT:
        group_key: Hashable = _ABSENT
    elif type(group) is dict:
        name = group.get("podGroupName")
        if name is not None and type(name) is not str:
            return None
        group_key = (bool(group), name)
    else:
        return None
    gang = membership.gang
    # The later-members annotation is planned from the gang's later roles.
    later = tuple(
        (r.count, tuple(sorted(r.demand.items())), r.placement.node_selector)
        for r in gang.roles
        if r.later
    )
    return (
        id(config), namespace, gang.name, gang.min_member, gang.source, membership.role,
        labels, annotations, scheduler, node, gates_key, group_key,
        bool(spec.get("workloadRef")), later,
    )


class PlanMemo:
    """plan_pod and json_patch answers by `shape_key`, at most `size` of them."""

    def __init__(self, size: int = 4096) -> None:
        self._entries: BoundedMemo[
            tuple[Hashable, ...], tuple[Config, MutationPlan, list[Any]]
        ] = BoundedMemo(size)

    def plan(
        self, pod: KubeObject, membership: PodMembership, config: Config, namespace: str
    ) -> tuple[MutationPlan, list[dict[str, Any]]]:
        """The plan for `pod` and the JSONPatch that carries it out (shared: read only)."""
        key = shape_key(pod, membership, config, namespace)
        if key is not None:
            hit = self._entries.get(key)
            # The entry keeps the config, so its id is not reused while it lives.
            if hit is not None and hit[0] is config:
                return hit[1], hit[2]
        plan = plan_pod(pod, membership, config, namespace)
        ops = plan.json_patch(pod)
        if key is not None:
            self._entries.put(key, (config, plan, ops))
        return plan, ops
