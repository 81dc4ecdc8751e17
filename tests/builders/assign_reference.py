"""The assigner as it was before it searched groups of nodes (commit b2ba8e8): the
reference the grouped search must equal, decision for decision (tests only)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gangkeeper.policies.assigner.assign import (
    Assignment,
    Member,
    NodeView,
    NoRoom,
    Unpinned,
    eligible,
    fits,
)
from gangkeeper.policies.model import Placement

#: Gangs up to this many members are searched exactly (with backtracking).
EXACT_MEMBERS = 64
#: Search steps before the exact search gives up (each is one member tried on one node).
SEARCH_BUDGET = 20_000


Result = Assignment | Unpinned | NoRoom
_Free = tuple[tuple[str, int], ...]
#: A search state: the position, and the multiset of (node signature, free amounts at
#: the start, free amounts now) of the nodes members are on.
_State = tuple[int, tuple[tuple[int, _Free, _Free], ...]]


@dataclass
class _Search:
    members: list[Member]
    nodes: list[NodeView]
    #: Per member, the indexes of the nodes it may use.
    eligible: list[list[int]]
    free: list[dict[str, int]]
    scale: dict[str, int]
    budget: int
    chosen: list[int] = field(default_factory=list)
    failed: set[_State] = field(default_factory=set)
    #: Nodes with equal eligibility for every member are interchangeable when their
    #: free amounts are equal too: the search tries only one of them.
    signature: list[int] = field(default_factory=list)
    #: Per node, its free amounts as a sorted tuple (kept up to date by `take`).
    free_key: list[_Free] = field(default_factory=list)
    #: The free amounts each node started with, and the nodes a member was put on.
    initial_key: list[_Free] = field(default_factory=list)
    touched: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.free_key = [tuple(sorted(f.items())) for f in self.free]
        self.initial_key = list(self.free_key)

    def leftover(self, node: int, member: Member) -> float:
        """How much of the node stays free after the member, scaled per resource."""
        free = self.free[node]
        return sum(
            (free.get(r, 0) - a) / self.scale[r] for r, a in member.requests.items() if a > 0
        )

    def options(self, position: int) -> list[int]:
        member = self.members[position]
        seen: set[tuple[int, _Free]] = set()
        found: list[tuple[float, str, int]] = []
        for node in self.eligible[position]:
            if not fits(member.requests, self.free[node]):
                continue
            key = (self.signature[node], self.free_key[node])
            if key in seen:
                continue
            seen.add(key)
            found.append((self.leftover(node, member), self.nodes[node].name, node))
        found.sort()
        return [node for _, _, node in found]

    def take(self, node: int, member: Member, sign: int) -> None:
        free = self.free[node]
        for resource, amount in member.requests.items():
            free[resource] = free.get(resource, 0) - sign * amount
        self.free_key[node] = tuple(sorted(free.items()))
        self.touched[node] = self.touched.get(node, 0) + sign
        if not self.touched[node]:
            del self.touched[node]

    def state(self, position: int) -> _State:
        # The nodes no member is on are as they started, so the nodes members are on
        # (with what they started with and have free now) tell two states apart: equal
        # keys are equal fleets. Keying on every node instead sorted the whole fleet at
        # each step (a minute a pass for 1,000 gangs on 1,000 nodes).
        return position, tuple(
            sorted((self.signature[n], self.initial_key[n], self.free_key[n])
                   for n in self.touched)
        )

    def exact(self, position: int) -> bool | None:
        """True when the members from `position` on are placed; None on budget."""
        if position == len(self.members):
            return True
        key = self.state(position)
        if key in self.failed:
            return False
        member = self.members[position]
        for node in self.options(position):
            self.budget -= 1
            if self.budget < 0:
                return None
            self.take(node, member, +1)
            self.chosen.append(node)
            result = self.exact(position + 1)
            if result is not False:
                return result
            self.chosen.pop()
            self.take(node, member, -1)
        self.failed.add(key)
        return False

    def greedy(self) -> bool:
        for position, member in enumerate(self.members):
            options = self.options(position)
            if not options:
                return False
            self.take(options[0], member, +1)
            self.chosen.append(options[0])
        return True


def _order(members: Sequence[Member], scale: Mapping[str, int]) -> list[Member]:
    """Biggest first: by the largest share of any resource, then by the total share."""

    def size(member: Member) -> tuple[float, float, str]:
        shares = [a / scale[r] for r, a in member.requests.items() if a > 0]
        return (-max(shares, default=0.0), -sum(shares), member.name)

    return sorted(members, key=size)


def assign_reference(
    members: Sequence[Member],
    nodes: Sequence[NodeView],
    *,
    exact_members: int = EXACT_MEMBERS,
    budget: int = SEARCH_BUDGET,
) -> Result:
    """Place every member on a node; see the module docstring."""
    for member in members:
        if member.unmodeled:
            return Unpinned(f"pod {member.name} has {member.unmodeled}")
    resources = {r for m in members for r, a in m.requests.items() if a > 0}
    scale = {r: max([1, *(n.free.get(r, 0) for n in nodes)]) for r in resources}
    ordered = _order(members, scale)
    node_list = list(nodes)
    # Eligibility depends on the placement alone, and a gang's members mostly share one.
    by_placement: dict[Placement, list[int]] = {}
    for member in ordered:
        if member.placement not in by_placement:
            by_placement[member.placement] = [
                i for i, node in enumerate(node_list) if eligible(member, node)
            ]
    allowed = [by_placement[member.placement] for member in ordered]
    for member, options in zip(ordered, allowed, strict=True):
        if not options:
            return NoRoom(f"no Ready, uncordoned node matches pod {member.name}'s constraints")
    signatures: dict[tuple[bool, ...], int] = {}
    as_sets = {placement: set(options) for placement, options in by_placement.items()}
    allowed_sets = [as_sets[member.placement] for member in ordered]  # a list lookup: O(n²)
    signature = [
        signatures.setdefault(tuple(i in options for options in allowed_sets), len(signatures))
        for i in range(len(node_list))
    ]

    def fresh() -> _Search:
        return _Search(
            members=ordered,
            nodes=node_list,
            eligible=allowed,
            free=[dict(n.free) for n in node_list],
            scale=scale,
            budget=budget,
            signature=signature,
        )

    search = fresh()
    placed = search.exact(0) if len(ordered) <= exact_members else None
    if placed is None:
        # Too big to search, or out of steps: best-fit decreasing alone.
        search = fresh()
        placed = search.greedy()
    if not placed:
        return NoRoom(
            f"no assignment of the {len(ordered)} members to nodes with room for each "
            "was found"
        )
    return Assignment(
        nodes={m.name: node_list[n].name for m, n in zip(ordered, search.chosen, strict=True)}
    )
