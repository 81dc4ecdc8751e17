"""Packing identical-member items onto node bins: the exact search feasibility runs.

`Problem` is a gang reduced to `Item`s (identical members: one role, or roles merged
for equal demand and placement) and the `Bin`s of one capacity view; `search(problem)`
is a branch and bound over node types that answers FITS, IMPOSSIBLE or, when its step
budget runs out, UNDECIDED. `fits` and `per_node` are the two arithmetic rules the
bounds in `feasibility` share with it.

Pure: frozen dataclasses in, an `Outcome` out; no I/O. Knows nothing of messages or
verdicts (those are `feasibility`'s).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from ..cluster.node_shapes import Bin
from ..model import Placement

#: Search steps (each ~10-50 µs) before a heterogeneous gang is admitted as
#: undecided; bounds the time one admission can spend searching.
SEARCH_BUDGET = 2_500
#: The search recurses once per member; larger gangs rely on the bounds alone (and
#: stay well inside Python's recursion limit).
MAX_SEARCH_MEMBERS = 400


class Outcome(Enum):
    FITS = "fits"
    IMPOSSIBLE = "impossible"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Item:
    """Identical gang members: one role, or roles merged for equal demand/placement."""

    name: str
    count: int
    demand: tuple[tuple[str, int], ...]
    placement: Placement

    def needs(self, resource: str) -> int:
        return dict(self.demand).get(resource, 0)


@dataclass(frozen=True)
class Problem:
    items: tuple[Item, ...]
    bins: tuple[Bin, ...]
    #: Members that may be left out (size - minMember among GPU members).
    skips: int
    #: Text naming the minMember reduction for messages, "" when all must fit.
    scope: str


def fits(demand: Sequence[tuple[str, int]], gpus: Mapping[str, int]) -> bool:
    return all(gpus.get(r, 0) >= a for r, a in demand)


def per_node(demand: Sequence[tuple[str, int]], gpus: Mapping[str, int]) -> int:
    """How many members of this demand one node holds (min over its resources)."""
    return min(gpus.get(r, 0) // a for r, a in demand)


_Vector = tuple[tuple[str, int], ...]
#: A node type in the search: (which roles may use it, GPUs left per resource). Nodes
#: of one type are interchangeable, so the state is a count per type.
_NodeType = tuple[int, _Vector]


@dataclass(frozen=True)
class _Tables:
    """What the search precomputes once: member order, what is left from each step."""

    members: list[int]
    left_from: list[dict[int, int]]
    need_from: list[dict[str, int]]
    resources: list[str]
    eligibility: list[frozenset[int]]
    start: dict[_NodeType, int]


def _tables(problem: Problem) -> _Tables:
    items = problem.items
    order = sorted(
        range(len(items)),
        key=lambda i: (-max(a for _, a in items[i].demand), -items[i].count),
    )
    members = [i for i in order for _ in range(items[i].count)]
    # Members of each role still to place from each position on (incl. itself).
    left_from: list[dict[int, int]] = [{} for _ in range(len(members) + 1)]
    for position in range(len(members) - 1, -1, -1):
        left_from[position] = dict(left_from[position + 1])
        index = members[position]
        left_from[position][index] = left_from[position].get(index, 0) + 1
    resources = sorted({r for item in items for r, _ in item.demand})
    need_from = [dict.fromkeys(resources, 0) for _ in range(len(members) + 1)]
    for position in range(len(members) - 1, -1, -1):
        need_from[position] = dict(need_from[position + 1])
        for r, a in items[members[position]].demand:
            need_from[position][r] += a
    eligibility = sorted({bn.eligible for bn in problem.bins if bn.count}, key=sorted)
    group_of = {e: g for g, e in enumerate(eligibility)}
    state: dict[_NodeType, int] = {}
    for bn in problem.bins:
        if bn.count:
            node_type = (group_of[bn.eligible], bn.gpus)
            state[node_type] = state.get(node_type, 0) + bn.count
    return _Tables(members, left_from, need_from, resources, eligibility, state)


def search(problem: Problem) -> Outcome:
    """Branch and bound over node types; FITS, IMPOSSIBLE, or UNDECIDED on budget.

    Members are placed biggest first, each on the tightest node type that holds it
    (so the first descent is best-fit decreasing). Every call, memo hits included,
    spends one unit of SEARCH_BUDGET, which bounds the time of any one decision.
    Two sound prunes cut branches early: the GPUs still needed vs the GPUs left, and
    the members of the current role still to place vs the slots left for them.
    """
    if sum(item.count for item in problem.items) > MAX_SEARCH_MEMBERS:
        return Outcome.UNDECIDED
    items = problem.items
    table = _tables(problem)
    members, left_from, need_from = table.members, table.left_from, table.need_from
    resources, eligibility, state = table.resources, table.eligibility, dict(table.start)
    failed: set[tuple[int, int, frozenset[tuple[_NodeType, int]]]] = set()
    budget = SEARCH_BUDGET

    def move(source: _NodeType, target: _NodeType) -> None:
        state[source] -= 1
        if not state[source]:
            del state[source]
        state[target] = state.get(target, 0) + 1

    def hopeless(position: int) -> bool:
        """Sound: too few GPUs left, or too few slots left for some role's members."""
        left = dict.fromkeys(resources, 0)
        slots = dict.fromkeys(left_from[position], 0)
        for (group, gpus), n in state.items():
            have = dict(gpus)
            for r, a in gpus:
                if r in left:
                    left[r] += n * a
            for index in slots:
                if index in eligibility[group]:
                    slots[index] += n * per_node(items[index].demand, have)
        if any(slots[index] < wanted for index, wanted in left_from[position].items()):
            return True
        return any(need_from[position][r] > left[r] for r in resources)

    def place(position: int, skips: int) -> bool | None:
        nonlocal budget
        if position == len(members):
            return True
        budget -= 1
        if budget < 0:
            return None
        key = (position, skips, frozenset(state.items()))
        if key in failed:
            return False
        index = members[position]
        item = items[index]
        if not skips and hopeless(position):
            failed.add(key)
            return False
        # Best fit first: the tightest node that still holds the member.
        options = sorted(
            (sum(a for _, a in gpus), (group, gpus))
            for group, gpus in state
            if index in eligibility[group] and fits(item.demand, dict(gpus))
        )
        demand = dict(item.demand)
        for _, node_type in options:
            group, gpus = node_type
            after = (group, tuple((r, a - demand.get(r, 0)) for r, a in gpus))
            move(node_type, after)
            result = place(position + 1, skips)
            move(after, node_type)
            if result is not False:
                return result
        if skips > 0:
            result = place(position + 1, skips - 1)
            if result is not False:
                return result
        failed.add(key)
        return False

    result = place(0, problem.skips)
    if result is None:
        return Outcome.UNDECIDED
    return Outcome.FITS if result else Outcome.IMPOSSIBLE
