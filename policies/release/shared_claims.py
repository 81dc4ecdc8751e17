"""Gang members that share a ResourceClaim, assigned as one: they must run on one node.

A ResourceClaim that pods name (`resourceClaimName`) is allocated once, on the node of
the first of them the scheduler binds (its devices are that node's), and every other
pod naming it must then run where its allocation says. So the release assigns the
members that share claims (transitively: two claims shared by overlapping members make
one group) as one member: their requests summed, plus, while a claim is not allocated,
its devices once (`PodInfo.shared_claims`, from `dra.pinnable.Pinning.shared`); once it
is allocated to a node, that node only (`assigner.pin.pinned`). Each member of the
group is then pinned to the node the group was given.

A group whose members ask different node placements (selectors, affinity,
tolerations), or whose claims are allocated to two different nodes, cannot be one
member: `grouped` says why, and the gang is released unpinned (the allocator decides).

Pure: `PodInfo`s and assigner `Member`s in, `Member`s and frozen values out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..assigner.assign import Member
from ..assigner.pin import pinned
from ..cluster.observed_gangs import PodInfo


@dataclass(frozen=True)
class Sharing:
    """Members assigned as one (the first name is the assigner's member) and the
    devices of the claims they share that no allocation holds yet, asked once."""

    members: tuple[str, ...]
    claims: tuple[str, ...]
    devices: Mapping[str, int]


def _groups(pods: Sequence[PodInfo]) -> list[list[PodInfo]]:
    """The pods naming shared claims, grouped by the claims they share (transitively),
    each group in the order given."""
    group_of: dict[str, int] = {}  # claim -> group id
    parent: list[int] = []

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for pod in pods:
        for claim, _, _ in pod.shared_claims:
            if claim not in group_of:
                group_of[claim] = len(parent)
                parent.append(len(parent))
        roots = {root(group_of[c]) for c, _, _ in pod.shared_claims}
        first = min(roots, default=None)
        for other in roots:
            parent[other] = first if first is not None else other
    grouped: dict[int, list[PodInfo]] = {}
    for pod in pods:
        if pod.shared_claims:
            grouped.setdefault(root(group_of[pod.shared_claims[0][0]]), []).append(pod)
    return list(grouped.values())


def grouped(
    pods: Mapping[str, PodInfo], wanted: list[Member]
) -> tuple[list[Member], dict[str, Sharing]] | str:
    """`wanted` with the members sharing claims replaced by one member per group (named
    as the group's first), and each such member's `Sharing`; or why they cannot be."""
    sharers = [pods[m.name] for m in wanted if m.name in pods and pods[m.name].shared_claims]
    if not sharers:
        return wanted, {}
    by_name = {m.name: m for m in wanted}
    merged: dict[str, Member] = {}
    sharing: dict[str, Sharing] = {}
    gone: set[str] = set()
    for group in _groups(sharers):
        claims = {c: (node, devices) for p in group for c, node, devices in p.shared_claims}
        names = sorted(claims)
        nodes = sorted({node for node, _ in claims.values() if node})
        if len(nodes) > 1:
            return (f"shared ResourceClaims {', '.join(names)} are allocated on nodes "
                    f"{', '.join(nodes)}, and their pods may run on one only")  # fmt: skip
        placements = {by_name[p.name].placement for p in group}
        if len(placements) > 1:
            return (f"the members sharing ResourceClaim {names[0]} ask different node "
                    "placements")  # fmt: skip
        devices: Counter[str] = Counter()
        for node, claim_devices in claims.values():
            if not node:
                devices.update(claim_devices)
        requests: Counter[str] = Counter(devices)
        for pod in group:
            requests.update(by_name[pod.name].requests)
        placement = placements.pop()
        first = group[0].name
        why = next((by_name[p.name].unmodeled for p in group if by_name[p.name].unmodeled), "")
        merged[first] = Member(first, dict(requests),
                               pinned(placement, nodes[0]) if nodes else placement, why)
        sharing[first] = Sharing(tuple(p.name for p in group), tuple(names), dict(devices))
        gone.update(p.name for p in group[1:])
    return [merged.get(m.name, m) for m in wanted if m.name not in gone], sharing
