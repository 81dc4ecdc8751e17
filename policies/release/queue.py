"""A waiting gang's place in the queue for the nodes it may use.

A gate-backend gang that waits for room (it reached the holding rule of `plan`: code
`no-fit`, `held`, `preempting` or `provisioning`) waits for the nodes it may use: every
node, held or not, that one of its gated members' placements is eligible for (any node
for a gang without GPUs). Two such gangs **compete** when those node sets intersect;
two gangs with no eligible node at all compete too (they wait for the same absent
room). A gang's queue is the gangs it competes with, itself included, in the plan's
order (priority, then age: the order in which the holding rule lets an earlier gang
hold nodes a later one may use). Its `position` is 1 + the number of them before it,
`ahead` names the first `AHEAD_SHOWN` of those, front first.

Competing is not transitive: with A on pool x, B on x and y, C on y, B is behind A and
C behind B, but C is not behind A (A holds nothing C may use). What always holds:
gangs with the same node set have strictly increasing positions in the plan's order,
and a gang never has a gang the plan takes after it (lower priority, or younger at
equal priority) ahead of it.

Cost: overlap is judged once per pair of distinct node sets (gangs share a few); a
gang's count ahead sums over the sets overlapping its own or, when fewer, those that
do not; the names ahead are appended only to lists not yet full. O(distinct sets² +
gangs x distinct sets / 2) at worst, never gangs².

Pure: names in, frozen dataclasses out.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

#: Gangs named as ahead of a gang (the rest are counted: `Place.ahead_count`).
AHEAD_SHOWN = 5

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Place:
    """One waiting gang's place in its queue."""

    #: 1-based: 1 + the gangs of its queue the plan takes before it.
    position: int
    #: The gangs of its queue (itself included).
    length: int
    #: The first gangs ahead of it ("namespace/name"), front first, `AHEAD_SHOWN` at most.
    ahead: tuple[str, ...]

    @property
    def ahead_count(self) -> int:
        return self.position - 1


def places(waiting: Iterable[tuple[K, str, frozenset[str]]]) -> dict[K, Place]:
    """Each waiting gang's place: `waiting` is (key, "namespace/name", the nodes it may
    use) per gang waiting for room, in the plan's order."""
    queues = _Queues()
    order = [(key, *queues.join(name, nodes)) for key, name, nodes in waiting]
    return {
        key: Place(position=before + 1, length=queues.length(i), ahead=ahead)
        for key, i, before, ahead in order
    }


class _Queues:
    """The gangs so far, by distinct node set (one pass of `places`)."""

    def __init__(self) -> None:
        self.sets: list[frozenset[str]] = []
        self.index: dict[frozenset[str], int] = {}
        #: Per node set: the sets overlapping it (itself included) and the others.
        self.near: list[list[int]] = []
        self.far: list[list[int]] = []
        #: Per node set: its gangs so far, and the first of them ((order, name)).
        self.count: list[int] = []
        self.front: list[list[tuple[int, str]]] = []
        #: Per node set: the first gangs so far on sets overlapping it, and those of
        #: its overlapping sets whose such list is not full yet (a gang on it joins them).
        self.ahead: list[list[str]] = []
        self.filling: list[list[int]] = []
        #: Every gang so far: (its node set, its name).
        self.log: list[tuple[int, str]] = []

    def join(self, name: str, nodes: frozenset[str]) -> tuple[int, int, tuple[str, ...]]:
        """A gang comes last: its node set, how many are ahead of it, the first of them."""
        i = self.index.get(nodes)
        if i is None:
            i = self._add(nodes)
        place = (i, self._on(i, len(self.log)), tuple(self.ahead[i]))
        self.count[i] += 1
        if len(self.front[i]) < AHEAD_SHOWN:
            self.front[i].append((len(self.log), name))
        self.log.append((i, name))
        # It comes last in every list it joins: appended, the lists stay in order.
        if self.filling[i]:
            for j in self.filling[i]:
                if len(self.ahead[j]) < AHEAD_SHOWN:
                    self.ahead[j].append(name)
            self.filling[i] = [j for j in self.filling[i] if len(self.ahead[j]) < AHEAD_SHOWN]
        return place

    def length(self, i: int) -> int:
        """The gangs waiting on set i or on one overlapping it."""
        return self._on(i, len(self.log))

    def _on(self, i: int, every: int) -> int:
        """The gangs on sets overlapping set i, of `every` so far: summed over the
        shorter list (those on disjoint sets taken from all)."""
        near, far = self.near[i], self.far[i]
        if len(near) <= len(far):
            return sum(self.count[j] for j in near)
        return every - sum(self.count[j] for j in far)

    def _add(self, nodes: frozenset[str]) -> int:
        """A new distinct node set: which others it overlaps (judged once), and the
        first gangs so far on those."""
        i = self.index[nodes] = len(self.sets)
        near, far = [i], []
        for j, other in enumerate(self.sets):
            if nodes.isdisjoint(other):
                far.append(j)
                self.far[j].append(i)
            else:
                near.append(j)
                self.near[j].append(i)
        self.sets.append(nodes)
        self.near.append(near)
        self.far.append(far)
        self.count.append(0)
        self.front.append([])
        self.filling.append([j for j in near[1:] if len(self.ahead[j]) < AHEAD_SHOWN])
        first = self._first(near, far)
        self.ahead.append(first)
        if len(first) < AHEAD_SHOWN:
            for j in near:
                self.filling[j].append(i)
        return i

    def _first(self, near: Sequence[int], far: Sequence[int]) -> list[str]:
        """The first gangs so far on the sets `near`: merged from those sets' first
        gangs when they are few, else read off the gangs so far in order (most are on
        them, since few sets are not)."""
        if len(near) <= len(far):
            merged = heapq.nsmallest(AHEAD_SHOWN, (e for j in near for e in self.front[j]))
            return [name for _, name in merged]
        inside = set(near)
        first: list[str] = []
        for where, name in self.log:
            if where in inside:
                first.append(name)
                if len(first) == AHEAD_SHOWN:
                    break
        return first


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
