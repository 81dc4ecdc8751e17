"""A gang as the controller sees it, as the policy core's `Gang`: what feasibility,
the assigner and `explain` judge it by.

Pure: `PodInfo`s in, a `Gang` out.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..cluster.later_members import LaterMembers
from ..cluster.observed_gangs import GangObservation, PodInfo
from ..model import Gang, Placement, Role, Source


def gang_model(
    gang: GangObservation,
    members: Sequence[PodInfo],
    *,
    later: Sequence[tuple[LaterMembers, int]] = (),
    min_member: int | None = None,
) -> Gang:
    """The policy core's `Gang` for these members: one role per (role, demand, placement),
    plus a role per kind of `later` member still to come.

    minMember is the number of members (later ones included) unless given: every
    member to be released must fit, with room for those to come.
    """
    _Key = tuple[str, tuple[tuple[str, int], ...], Placement, tuple[tuple[str, int], ...]]
    groups: dict[_Key, int] = {}
    for member in members:
        # The other requests (cpu, memory, ...) too: feasibility refuses by them.
        other = tuple(
            sorted(
                (r, a) for r, a in member.requests.items() if r != "pods" and r not in member.demand
            )
        )
        key = (
            member.role or "member", tuple(sorted(member.demand.items())), member.placement, other
        )
        groups[key] = groups.get(key, 0) + 1
    roles: list[Role] = []
    seen: dict[str, int] = {}
    for (role, demand, placement, other), count in groups.items():
        # Role names must be unique; the same role with two shapes gets a suffix.
        seen[role] = seen.get(role, 0) + 1
        name = role if seen[role] == 1 else f"{role}-{seen[role]}"
        roles.append(
            Role(
                name=name, count=count, demand=dict(demand), placement=placement,
                requests=dict(other),
            )
        )
    for index, (entry, count) in enumerate(later):
        roles.append(
            Role(f"later-{index}", count, dict(entry.demand), entry.placement, later=True)
        )
    owner = gang.owner
    source = (
        Source(owner.api_version, owner.kind, gang.namespace, owner.name, owner.uid)
        if owner is not None
        else Source("v1", "Pod", gang.namespace, members[0].name if members else gang.label)
    )
    size = len(members) + sum(count for _, count in later)
    return Gang(
        namespace=gang.namespace,
        name=gang.name,
        min_member=min(min_member, size) if min_member is not None else size,
        roles=tuple(roles),
        source=source,
        recognizer="controller",
    )
