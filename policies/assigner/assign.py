"""Assign every member of a gang to a node, or say why not: the release's placement.

`assign(members, nodes)` returns
- `Assignment`: member name → node name, such that each member is eligible on its
  node (nodeSelector, required node affinity, taints — `policies.eligibility`, the
  scheduler's own filters), the node is Ready and not cordoned, and no node goes
  over any resource (every resource a member requests, `pods` included) of its
  *free* amount — which the caller has already reduced by bound pods, pods in
  flight and other gangs' pinned members;
- `Unpinned(reason)`: a member has a constraint the assigner does not model
  (`constraints.unmodeled`), so no pin can be promised; the gang goes to the scheduler
  unpinned;
- `NoRoom(reason)`: no assignment was found.

Small gangs (≤ `EXACT_MEMBERS`) get an exact depth-first search: members biggest
first, each tried on interchangeable nodes only once (same eligibility, same free
amounts), tightest node first, failed states remembered, within `SEARCH_BUDGET`
steps. The first descent is best-fit decreasing; backtracking makes it complete for
small gangs. Larger gangs get best-fit decreasing alone. Tightest-first leaves the
largest free blocks for the next gang.

The search works on *buckets* of interchangeable nodes, never on nodes one by one: a
gang costs members times buckets, and a fleet of 5,000 nodes in a few dozen kinds is a
few dozen buckets. `assign_groups(members, groups, names)` takes the nodes already
grouped (`Group`: nodes of equal eligibility and equal free amounts, by index into
`names`), as the controller's fleet keeps them between gangs; `assign(members,
nodes)` groups a plain list of nodes first. Within a bucket the node that comes first
(in `names` order) is taken first, so the answer is the one a node-by-node search in
that order gives.

Pure: frozen dataclasses in and out; no I/O.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..eligibility import node_eligible
from ..model import Placement, Taint
from .whole_nodes import asks_devices, tie

#: Gangs up to this many members are searched exactly (with backtracking).
EXACT_MEMBERS = 64
#: Search steps before the exact search gives up (each is one member tried on one node).
SEARCH_BUDGET = 20_000


@dataclass(frozen=True)
class Member:
    """One gated member to place: its requests (placement units, `pods` included)."""

    name: str
    requests: Mapping[str, int]
    placement: Placement = field(default_factory=Placement)
    #: Why it cannot be pinned (`constraints.unmodeled`); "" when it can.
    unmodeled: str = ""


@dataclass(frozen=True)
class NodeView:
    """A node as the assigner sees it: what it is and what is free on it now."""

    name: str
    labels: Mapping[str, str]
    #: Taints in force now (a cordon included as node.kubernetes.io/unschedulable).
    taints: tuple[Taint, ...]
    free: Mapping[str, int]
    ready: bool = True
    unschedulable: bool = False


@dataclass(frozen=True)
class Group:
    """Nodes that any member is eligible on alike, with equal free amounts.

    `like` is one of them as the assigner sees it (its labels, taints and readiness
    decide eligibility for the whole group, its `free` is every one's); `nodes` are
    indexes into the caller's `names`, ascending.
    """

    like: NodeView
    nodes: Sequence[int]


@dataclass(frozen=True)
class Assignment:
    """Member name → node name, for every member."""

    nodes: Mapping[str, str]


@dataclass(frozen=True)
class Unpinned:
    reason: str


@dataclass(frozen=True)
class NoRoom:
    reason: str


Result = Assignment | Unpinned | NoRoom
_Free = tuple[tuple[str, int], ...]
#: A bucket: the node's eligibility for each of the gang's placements (its signature)
#: and its free amounts now.
_Key = tuple[int, _Free]
#: A search state: the position, and the multiset of (node signature, free amounts at
#: the start, free amounts now) of the nodes members are on.
_State = tuple[int, tuple[tuple[int, _Free, _Free], ...]]


def eligible(member: Member, node: NodeView) -> bool:
    """May the scheduler bind this member on this node, resources aside?"""
    return eligible_for(member.placement, node)


def eligible_for(placement: Placement, node: NodeView) -> bool:
    if not node.ready or node.unschedulable:
        return False
    return node_eligible(placement, node_name=node.name, labels=node.labels, taints=node.taints)


def fits(requests: Mapping[str, int], free: Mapping[str, int]) -> bool:
    # A loop, not all() of a generator: the search asks this members x buckets times.
    for resource, amount in requests.items():
        if amount > 0 and free.get(resource, 0) < amount:
            return False
    return True


def free_key(free: Mapping[str, int]) -> _Free:
    return tuple(sorted(free.items()))


class _Bucket:
    """Interchangeable nodes: some shared, read-only runs of the caller's groups (taken
    from the front, by an offset) and the nodes the search moved here."""

    __slots__ = ("free", "key", "local", "offsets", "runs", "signature")

    def __init__(self, signature: int, key: _Free) -> None:
        self.signature = signature
        self.key = key
        self.free = dict(key)
        self.runs: list[Sequence[int]] = []
        self.offsets: list[int] = []
        self.local: list[int] = []

    def first(self) -> int | None:
        """The node to take next: the one that comes first among those here."""
        best = self.local[0] if self.local else None
        for run, offset in zip(self.runs, self.offsets, strict=True):
            if offset < len(run) and (best is None or run[offset] < best):
                best = run[offset]
        return best

    def take_first(self) -> tuple[int, int]:
        """Remove the first node; returns it and where it was (-1: moved here)."""
        best, where = self.local[0] if self.local else None, -1
        for index, (run, offset) in enumerate(zip(self.runs, self.offsets, strict=True)):
            if offset < len(run) and (best is None or run[offset] < best):
                best, where = run[offset], index
        assert best is not None
        if where < 0:
            del self.local[0]
        else:
            self.offsets[where] += 1
        return best, where

    def put_back(self, node: int, where: int) -> None:
        """Undo `take_first` (the search undoes in reverse order)."""
        if where < 0:
            insort(self.local, node)
        else:
            self.offsets[where] -= 1

    def remove(self, node: int) -> None:
        del self.local[bisect_left(self.local, node)]


@dataclass
class _Search:
    members: list[Member]
    names: Sequence[str]
    #: Per member, the index of its placement in the signature.
    placement_of: list[int]
    #: Signature id → eligibility per placement.
    signatures: list[tuple[bool, ...]]
    buckets: dict[_Key, _Bucket]
    scale: dict[str, int]
    budget: int
    chosen: list[int] = field(default_factory=list)
    failed: set[_State] = field(default_factory=set)
    #: The nodes members were put on: signature, free at the start, free now, members.
    signature_of: dict[int, int] = field(default_factory=dict)
    initial: dict[int, _Free] = field(default_factory=dict)
    now: dict[int, _Free] = field(default_factory=dict)
    touched: dict[int, int] = field(default_factory=dict)
    #: What each take did, to undo it: (node, bucket left, where in it, bucket entered).
    undo: list[tuple[int, _Key, int, _Key]] = field(default_factory=list)

    def leftover(self, free: Mapping[str, int], member: Member) -> float:
        """How much of the node stays free after the member, scaled per resource."""
        total: float = 0  # summed from 0 and in this order, as sum() did
        scale = self.scale
        for resource, amount in member.requests.items():
            if amount > 0:
                total += (free.get(resource, 0) - amount) / scale[resource]
        return total

    def options(self, position: int) -> list[_Key]:
        member = self.members[position]
        placement = self.placement_of[position]
        found: list[tuple[float, str, int, _Key]] = []
        for key, bucket in self.buckets.items():
            if not self.signatures[bucket.signature][placement]:
                continue
            if not fits(member.requests, bucket.free):
                continue
            node = bucket.first()
            if node is None:
                continue
            found.append((self.leftover(bucket.free, member), self.names[node], node, key))
        found.sort()
        return [key for _, _, _, key in found]

    def _bucket(self, key: _Key) -> _Bucket:
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = _Bucket(*key)
        return bucket

    def take(self, key: _Key, member: Member) -> None:
        bucket = self.buckets[key]
        node, where = bucket.take_first()
        free = dict(bucket.free)
        for resource, amount in member.requests.items():
            if amount > 0:
                free[resource] = free.get(resource, 0) - amount
        if asks_devices(member.requests):
            tie(free, member.requests)  # an All request's whole node and its devices
        entered = (bucket.signature, free_key(free))
        insort(self._bucket(entered).local, node)
        if node not in self.touched:
            self.signature_of[node] = bucket.signature
            self.initial.setdefault(node, bucket.key)
        self.now[node] = entered[1]
        self.touched[node] = self.touched.get(node, 0) + 1
        self.undo.append((node, key, where, entered))
        self.chosen.append(node)

    def untake(self) -> None:
        node, left, where, entered = self.undo.pop()
        self.chosen.pop()
        self.buckets[entered].remove(node)
        self.buckets[left].put_back(node, where)
        self.now[node] = left[1]
        self.touched[node] -= 1
        if not self.touched[node]:
            del self.touched[node]

    def state(self, position: int) -> _State:
        # The nodes no member is on are as they started, so the nodes members are on
        # (with what they started with and have free now) tell two states apart: equal
        # keys are equal fleets.
        return position, tuple(
            sorted((self.signature_of[n], self.initial[n], self.now[n]) for n in self.touched)
        )

    def exact(self, position: int) -> bool | None:
        """True when the members from `position` on are placed; None on budget."""
        if position == len(self.members):
            return True
        key = self.state(position)
        if key in self.failed:
            return False
        member = self.members[position]
        for option in self.options(position):
            self.budget -= 1
            if self.budget < 0:
                return None
            self.take(option, member)
            result = self.exact(position + 1)
            if result is not False:
                return result
            self.untake()
        self.failed.add(key)
        return False

    def greedy(self) -> bool:
        for position, member in enumerate(self.members):
            options = self.options(position)
            if not options:
                return False
            self.take(options[0], member)
        return True


def _order(members: Sequence[Member], scale: Mapping[str, int]) -> list[Member]:
    """Biggest first: by the largest share of any resource, then by the total share."""

    def size(member: Member) -> tuple[float, float, str]:
        shares = [a / scale[r] for r, a in member.requests.items() if a > 0]
        return (-max(shares, default=0.0), -sum(shares), member.name)

    return sorted(members, key=size)


def assign(
    members: Sequence[Member],
    nodes: Sequence[NodeView],
    *,
    exact_members: int = EXACT_MEMBERS,
    budget: int = SEARCH_BUDGET,
) -> Result:
    """Place every member on a node; see the module docstring."""
    placements = list(dict.fromkeys(m.placement for m in members))
    # Nodes are grouped by their eligibility for this gang, which may read each node's
    # own name or labels, and their free amounts.
    grouped: dict[tuple[tuple[bool, ...], _Free], list[int]] = {}
    for index, node in enumerate(nodes):
        signature = tuple(eligible_for(p, node) for p in placements)
        grouped.setdefault((signature, free_key(node.free)), []).append(index)
    groups = [Group(nodes[indexes[0]], indexes) for indexes in grouped.values()]
    return assign_groups(
        members, groups, [n.name for n in nodes], exact_members=exact_members, budget=budget
    )


def assign_groups(
    members: Sequence[Member],
    groups: Sequence[Group],
    names: Sequence[str],
    *,
    exact_members: int = EXACT_MEMBERS,
    budget: int = SEARCH_BUDGET,
) -> Result:
    """`assign` over nodes already grouped: each `Group`'s nodes are eligible alike for
    every member (the caller guarantees it: no member reads node identity, or the
    groups were made per gang) and have equal free amounts."""
    for member in members:
        if member.unmodeled:
            return Unpinned(f"pod {member.name} has {member.unmodeled}")
    present = [g for g in groups if g.nodes]
    resources = {r for m in members for r, a in m.requests.items() if a > 0}
    scale = {r: max([1, *(g.like.free.get(r, 0) for g in present)]) for r in resources}
    ordered = _order(members, scale)
    placements = list(dict.fromkeys(m.placement for m in ordered))
    index_of = {p: i for i, p in enumerate(placements)}
    signature_ids: dict[tuple[bool, ...], int] = {}
    group_signature: list[int] = []
    for group in present:
        signature = tuple(eligible_for(p, group.like) for p in placements)
        group_signature.append(signature_ids.setdefault(signature, len(signature_ids)))
    signatures = list(signature_ids)
    usable = {i for sig in signatures for i, ok in enumerate(sig) if ok}
    for member in ordered:
        if index_of[member.placement] not in usable:
            return NoRoom(f"no Ready, uncordoned node matches pod {member.name}'s constraints")

    def fresh() -> _Search:
        buckets: dict[_Key, _Bucket] = {}
        for group, signature in zip(present, group_signature, strict=True):
            key = (signature, free_key(group.like.free))
            bucket = buckets.get(key)
            if bucket is None:
                bucket = buckets[key] = _Bucket(*key)
            bucket.runs.append(group.nodes)
            bucket.offsets.append(0)
        return _Search(
            members=ordered,
            names=names,
            placement_of=[index_of[m.placement] for m in ordered],
            signatures=signatures,
            buckets=buckets,
            scale=scale,
            budget=budget,
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
        nodes={m.name: names[n] for m, n in zip(ordered, search.chosen, strict=True)}
    )
