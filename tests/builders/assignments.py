"""Assignments of gang members to nodes checked the slow, obvious way, for the property
tests of `policies.assigner`: every member eligible where it goes, and no node's free
resources exceeded.

Test helpers only: plain values in, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import product

from gangkeeper.policies.assigner import Assignment, Member, NodeView
from gangkeeper.policies.assigner.assign import eligible


def fits(gang: Sequence[Member], fleet: Sequence[NodeView], choice: Sequence[int]) -> bool:
    """Member i on fleet[choice[i]]: each eligible there, every node's requests within
    its free resources."""
    free = [dict(n.free) for n in fleet]
    for member, index in zip(gang, choice, strict=True):
        if not eligible(member, fleet[index]):
            return False
        for resource, amount in member.requests.items():
            free[index][resource] = free[index].get(resource, 0) - amount
            if free[index][resource] < 0:
                return False
    return True


def valid_choices(gang: Sequence[Member], fleet: Sequence[NodeView]) -> Iterator[tuple[int, ...]]:
    """Every assignment that fits, by brute force (fleet indexes, one per member)."""
    for choice in product(range(len(fleet)), repeat=len(gang)):
        if fits(gang, fleet, choice):
            yield choice


def valid(result: Assignment, gang: Sequence[Member], fleet: Sequence[NodeView]) -> bool:
    """`result` places every member, on a node of `fleet`, where it fits."""
    index = {n.name: i for i, n in enumerate(fleet)}
    if set(result.nodes) != {m.name for m in gang}:
        return False
    if any(result.nodes[m.name] not in index for m in gang):
        return False
    return fits(gang, fleet, [index[result.nodes[m.name]] for m in gang])
