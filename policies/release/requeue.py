"""When to nudge a released coscheduling PodGroup so its scheduler tries it again.

The scheduler-plugins Coscheduling plugin rejects a gang's pods in PreFilter
(`UnschedulableAndUnresolvable`: "the cluster lacks minResources") or at Permit
(the gang's waiting pods, "optimistic rejection in PostFilter"). A pod rejected by
a plugin is retried only on the cluster events that plugin registers, and
Coscheduling registers exactly two (`pkg/coscheduling/coscheduling.go`,
`EventsToRegister`, v0.34.1-devel): Pod/Add and PodGroup/Add|Update. Freeing GPUs —
a pod deleted or finished, a node added — is none of them, so a gang that did not
fit stays parked in the scheduler's unschedulable pool until its periodic flush
(`podMaxInUnschedulablePodsDuration`, 5 minutes), even though it fits now.

gangkeeper sees capacity change (it watches pods and nodes), so after a pass in
which free GPUs rose on some node it touches an annotation of every released
coscheduling PodGroup whose members are not all bound: a PodGroup/Update, which
moves the rejected pods back to the scheduler's active queue at once. A new leader
does it once too, since it cannot know what changed while no one led.

`nudges(reports, pods, nodes, config, memory=, clock=)` decides a pass's nudges from
the controller's memory of the last pass (`NudgeMemory`: its free GPUs, and when a
second nudge is due) and returns the memory after it.

Pure: Node dicts, `PodInfo`s, the pass's reports and the memory in, names out. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from math import floor
from typing import Any

from ..cluster.observed_gangs import PodInfo
from ..errors import PolicyError
from ..names import NUDGE_ANNOTATION
from ..quantity import parse_quantity
from ..settings.config import Config
from .results import GangReport

#: Backends whose scheduler parks gang pods until an event it registered.
NUDGED_BACKENDS = frozenset({"coscheduling"})

FreeGpus = Mapping[tuple[str, str], int]
#: Seconds after a capacity change at which unbound coscheduling gangs are nudged again.
REQUEUE_AGAIN_SECONDS = 2.0


def free_gpus(
    nodes: Iterable[Mapping[str, Any]], pods: Iterable[PodInfo], config: Config
) -> dict[tuple[str, str], int]:
    """Free GPUs per (node, resource): allocatable less the demand of the pods bound there."""
    free: dict[tuple[str, str], int] = {}
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name", ""))
        for resource, raw in ((node.get("status") or {}).get("allocatable") or {}).items():
            if not config.is_gpu_resource(str(resource)):
                continue
            try:
                free[(name, str(resource))] = floor(parse_quantity(raw, "allocatable"))
            except PolicyError:
                continue
    for pod in pods:
        if not pod.node_name:
            continue
        for resource, amount in pod.demand.items():
            key = (pod.node_name, resource)
            if key in free:
                free[key] -= amount
    return free


def capacity_rose(before: FreeGpus | None, now: FreeGpus) -> bool:
    """Whether some node offers more free GPUs of some kind than at the last pass
    (None: no last pass to compare with, as for a new leader)."""
    if before is None:
        return True
    return any(amount > before.get(key, 0) for key, amount in now.items())


def groups_to_nudge(
    reports: Iterable[GangReport], pods: Iterable[PodInfo]
) -> list[tuple[str, str]]:
    """(namespace, PodGroup name) of released scheduler-placed gangs not all bound.

    The name is the one the members point at (their coscheduling label), which is
    the PodGroup the controller created for them."""
    wanted = {
        (r.namespace, r.label)
        for r in reports
        if r.backend in NUDGED_BACKENDS and r.state != "waiting" and not r.gated
        and r.bound < r.present
    }
    if not wanted:
        return []
    names: dict[tuple[str, str], str] = {}
    for pod in pods:
        key = (pod.namespace, pod.gang)
        if key in wanted and key not in names:
            names[key] = pod.group_name or pod.gang
    return sorted((namespace, name) for (namespace, _), name in names.items())


def requeue_patch(stamp: str) -> dict[str, Any]:
    """Merge patch touching only gangkeeper's annotation (a PodGroup/Update event)."""
    return {"metadata": {"annotations": {NUDGE_ANNOTATION: stamp}}}


@dataclass(frozen=True)
class NudgeMemory:
    """What the nudge remembers from the last pass as leader (a new leader: none)."""

    #: Free GPUs per (node, resource) then; None: no pass to compare with.
    free: FreeGpus | None = None
    #: When (the controller's monotonic clock) the second nudge is due, if one is.
    again_at: float | None = None


def nudges(
    reports: Iterable[GangReport],
    pods: Iterable[PodInfo],
    nodes: Iterable[Mapping[str, Any]],
    config: Config,
    *,
    memory: NudgeMemory,
    clock: float,
) -> tuple[list[tuple[str, str]], float | None, NudgeMemory]:
    """The PodGroups to nudge after this pass, in how many seconds to plan again for
    the second nudge (None: not asked), and the memory after the pass."""
    pods = list(pods)
    groups = groups_to_nudge(reports, pods)
    if not groups:
        # Nothing to nudge: no snapshot to keep either (the next gang that needs one
        # is nudged once, which costs one patch).
        return [], None, NudgeMemory()
    free = free_gpus(nodes, pods, config)
    if capacity_rose(memory.free, free):
        # The scheduler may retry before its own cache has the freed GPUs and park the
        # pods again; a second nudge a little later covers that race (one pending at a
        # time, however often GPUs free up meanwhile).
        if memory.again_at is None:
            return groups, REQUEUE_AGAIN_SECONDS, NudgeMemory(free, clock + REQUEUE_AGAIN_SECONDS)
        return groups, None, NudgeMemory(free, memory.again_at)
    if memory.again_at is not None and clock >= memory.again_at:
        return groups, None, NudgeMemory(free, None)
    return [], None, NudgeMemory(free, memory.again_at)
