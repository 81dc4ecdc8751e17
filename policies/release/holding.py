"""Why a gate-backend gang waits, and what it holds while it does.

`shortfall` says in numbers why members do not fit now; `hold_later` counts the room
of members that arrive only after release as used; `hold_and_ask` applies the
holding rule (a gang that could fit the empty cluster holds every node it may use) and
lets the gang ask an autoscaler for nodes (`policies.autoscaling.asking`). Called by
`release.plan` for each waiting gang.

Pure: `PodInfo`s and the pass's `Fleet` in, text and node names out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..autoscaling.asking import Asking
from ..cluster.capacity import Capacity
from ..cluster.fleet import Fleet
from ..cluster.later_members import LaterMembers
from ..cluster.node_resources import shown
from ..cluster.observed_gangs import GangObservation, PodInfo
from ..dra.resource_names import resource_text
from ..fit.feasibility import check_gang
from ..model import Gang, Placement


def shortfall(gang: GangObservation, members: Sequence[PodInfo], fleet: Fleet) -> str:
    """Why these members do not fit now: 'needs 8 nvidia.com/gpu, 5 free on eligible nodes'
    (for a gang without GPUs, the resources it asks more of than is free:
    'needs 400Mi memory, 300Mi free on eligible nodes')."""
    placements = sorted({m.placement for m in members}, key=repr)
    demand = gang.total_demand(members)
    if not demand:
        return _plain_shortfall(members, placements, fleet)
    parts: list[str] = []
    short = False
    for resource, need in sorted(demand.items()):
        free = fleet.free_for(placements, resource)
        short = short or free < need
        parts.append(f"needs {need} {resource_text(resource)}, {free} free on eligible nodes")
    text = "; ".join(parts)
    if not short:
        text += ", but no node has room for a whole member"
    return text


def _plain_shortfall(
    members: Sequence[PodInfo], placements: Sequence[Placement], fleet: Fleet
) -> str:
    need: dict[str, int] = {}
    for member in members:
        for resource, amount in member.requests.items():
            need[resource] = need.get(resource, 0) + amount
    parts = []
    for resource, total in sorted(need.items()):
        free = fleet.free_for(placements, resource, plain=True)
        if free < total:
            parts.append(f"needs {shown(resource, total)}, {shown(resource, free)} free")
    if parts:
        return "; ".join(parts) + " on eligible nodes"
    return f"no node has room for all {len(members)} members at once"



@dataclass(frozen=True)
class Waiting:
    """What `hold_and_ask` decided: nodes held, a wait code ("" keeps the caller's), and
    text to add to the reason."""

    held: tuple[str, ...]
    code: Literal["", "held", "provisioning"]
    reason: str


def hold_and_ask(
    gang: GangObservation,
    *,
    fleet: Fleet,
    asking: Asking,
    ever: Capacity,
    model: Gang,
    wanted: set[Placement],
    plain: bool = False,
) -> Waiting:
    """Hold the nodes a waiting gang may use (if it could ever fit; every node, GPUs or
    not, for a gang without GPUs: `plain`) and, on an autoscaled pool, ask for nodes."""
    could_fit = check_gang(model, ever).allowed
    asked = asking.consider(gang, fleet, could_fit)
    held: tuple[str, ...] = ()
    reason = ""
    if could_fit:
        held = fleet.reserve(sorted(wanted, key=repr), plain=plain)
    else:
        reason = "; it cannot fit even on the empty cluster, so it holds no nodes"
    code: Literal["", "held", "provisioning"] = ""
    if asked is not None:
        # A gang that gave up asking keeps the caller's code (it waits for room now).
        code = "held" if asked[0] == "held" else "" if asked[0] == "gave-up" else "provisioning"
        reason += asked[1]
    return Waiting(held, code, reason)


def hold_later(gang: GangObservation, fleet: Fleet) -> None:
    """Count the room of the gang's later members still to come as used."""
    for entry, count in gang.missing_later_members():
        for index in range(count):
            fleet.place(_later_member(gang, entry, index))


def _later_member(gang: GangObservation, entry: LaterMembers, index: int) -> PodInfo:
    return PodInfo(
        namespace=gang.namespace,
        name=f"{gang.label}-later-{index}",
        uid=f"later:{gang.namespace}/{gang.label}/{id(entry)}/{index}",
        resource_version="",
        created=0.0,
        node_name="",
        gates=(),
        demand=entry.demand,
        placement=entry.placement,
    )
