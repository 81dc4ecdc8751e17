"""The fleet a planning pass starts from, kept from one pass to the next.

Every pass starts the same way (`release.plan`): the nodes, the pods bound to them, and
then the pods in flight (free to schedule, not bound yet) placed first-fit one after
the other, oldest first, each on the first node it may use with room for its GPUs.
At 1,000 nodes and 8,000 pods in flight that start was about half of a pass.
`KeptFleet` keeps it and re-does only what a change can move:

- A pod in flight that may use exactly one node (a pod pinned to it: every gang
  member gangkeeper released pinned, by node name or, before, hostname label)
  competes only with the pods bound to that node and the pods in flight before it
  pinned to the same node. First-fit of such pods decomposes node by node, so a
  change re-places the pods of the nodes it touches (the node a changed pod is bound
  to, or pinned to, before or after) and no others.
- A pod in flight that may use several nodes takes the first with room, so what it
  takes depends on every pod before it: while one exists, any change to a bound or
  in-flight pod re-places every pod in flight (the start of a pass from scratch).
- Pods in flight are taken in one total order (`flight_order`), as a pass from
  scratch takes them, whatever order the caller lists them in.
- A change to the nodes rebuilds it all, and so does a memo of placements
  (`_targets`, the fleet's eligible nodes per placement) grown past twice what the
  last rebuild needed, plus one per node, plus `_MEMO_FLOOR`: it is kept while the
  nodes do not change, and each distinct placement ever seen (pins, pools,
  tolerations) adds to it. One per node because released members are pinned: a
  fleet's steady state holds a placement per node, which a burst before the release
  (no pins yet) does not show.

`update` returns what the pass needs: the fleet (read only; a pass changes a `copy`),
where the placeholders in flight were placed, and the placements that differ from the
last pass's (`delta`, counted: +1 new, -1 gone) so the planner knows whether what a
gang saw is what it sees now.

Pure: `PodInfo`s and Node dicts in, no I/O. Owned by one planner; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..assigner.pin import pin_of
from ..assigner.whole_nodes import free_of
from ..model import Placement
from ..settings.config import Config
from .fleet import Fleet, NodeReader
from .kept_capacity import KeptCapacity
from .observed_gangs import PodInfo, flight_order

#: A pod placed on a node, as the fleet counts it: (uid, node, GPU demand, requests).
Placed = tuple[str, str, tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]
#: Pod uid → (the pod before, the pod now); None: absent.
Changes = Mapping[str, tuple[PodInfo | None, PodInfo | None]]
_MANY = "\0many"
#: Placements a memo may gain beyond twice those of the last rebuild.
_MEMO_FLOOR = 4096


def placed(uid: str, node: str, demand: Mapping[str, int],
           requests: Mapping[str, int] | None) -> Placed:
    """A placement as a value (what `Fleet.add` counts)."""
    return (uid, node, tuple(sorted(demand.items())),
            tuple(sorted((demand if requests is None else requests).items())))


class KeptFleet:
    """The start of a pass (bound pods, then pods in flight first-fit), kept."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self.fleet: Fleet | None = None
        #: Node → uid → what is counted there (bound pods and pods in flight).
        self._on: dict[str, dict[str, Placed]] = {}
        #: Node → the pods bound to it, and the pods in flight that may use only it.
        self._bound: dict[str, dict[str, PodInfo]] = {}
        self._pinned: dict[str, dict[str, PodInfo]] = {}
        #: Pods in flight that may use several nodes (uid → pod).
        self._many: dict[str, PodInfo] = {}
        #: Placement (and whether without GPUs) → `_target`, for the nodes of `fleet`.
        self._targets: dict[tuple[Placement, bool], str] = {}
        self._memo_limit = _MEMO_FLOOR
        #: Where each pod in flight was placed, and the placeholders among them.
        self._placed: dict[str, str] = {}
        self._placeholders: set[str] = set()
        #: This pass's placements that differ from the last pass's (+1 new, -1 gone).
        self.delta: dict[Placed, int] = {}
        #: Nodes re-placed by the last `update` (all of them when rebuilt).
        self.replaced = 0

    @property
    def spots(self) -> dict[str, str]:
        """Where the placeholders in flight were placed (uid → node)."""
        return {u: self._placed[u] for u in self._placeholders if u in self._placed}

    def update(
        self,
        nodes: Sequence[Mapping[str, Any]],
        live: Sequence[PodInfo],
        changes: Changes | None,
        *,
        reader: NodeReader,
        kept: KeptCapacity,
        nodes_changed: bool,
    ) -> Fleet:
        """The fleet of this pass's start; `changes`: the pods changed since the last
        update (None: unknown, rebuild)."""
        self.delta = {}
        if self.fleet is None or nodes_changed or changes is None or self._outgrown():
            return self._rebuild(nodes, live, reader, kept)
        touched: set[str] = set()
        had_many = bool(self._many)
        for old, new in changes.values():
            for pod, sign in ((old, -1), (new, +1)):
                if pod is not None:
                    node = self._index(pod, sign)
                    if node:
                        touched.add(node)
        if not touched:
            self.replaced = 0
            return self.fleet
        if had_many or self._many:
            # First-fit over several nodes: every pod after a change may move.
            return self._rebuild(nodes, live, reader, kept)
        # Every node's new placements first, then the fleet moved: all pods out that
        # leave a node before any comes in (a pod moving nodes keeps its uid).
        planned = {node: self._plan(node) for node in sorted(touched)}
        out: list[tuple[Any, ...]] = []
        into: list[tuple[Any, ...]] = []
        for node, now in planned.items():
            before = self._on.get(node, {})
            out.extend(("unplace", uid, node, dict(e[2]), dict(e[3]))
                       for uid, e in before.items() if now.get(uid) != e)
            into.extend(("add", uid, node, dict(e[2]), dict(e[3]))
                        for uid, e in now.items() if before.get(uid) != e)
            self._count(before, now)
            if now:
                self._on[node] = now
            else:
                self._on.pop(node, None)
        # Every pod out before any comes in, the capacity moved once per node.
        self.fleet.replay(out + into)
        self.replaced = len(touched)
        return self.fleet

    def _outgrown(self) -> bool:
        return len(self._targets) > self._memo_limit

    # -- indexes ----------------------------------------------------------------------

    def _target(self, pod: PodInfo) -> str:
        """The one node a pod in flight may use, `_MANY`, or "" when it is placed nowhere
        (as `Fleet._first_fit` judges: a pod without GPUs only when pinned). Kept per
        placement while the nodes do not change."""
        plain = not pod.demand
        key = (pod.placement, plain)
        found = self._targets.get(key)
        if found is None:
            assert self.fleet is not None
            found = ""
            if not plain or pin_of(pod.placement) is not None:
                names = self.fleet.eligible(pod.placement, plain=plain)
                if names:
                    found = names[0] if len(names) == 1 else _MANY
            self._targets[key] = found
        return found

    def _index(self, pod: PodInfo, sign: int) -> str:
        """Add (+1) or drop (-1) a pod from the indexes; the node it touches ("" none)."""
        if pod.node_name:
            node = pod.node_name
            if sign > 0:
                self._bound.setdefault(node, {})[pod.uid] = pod
            else:
                self._bound.get(node, {}).pop(pod.uid, None)
            return node
        if not pod.in_flight:
            return ""
        if sign < 0:
            self._placed.pop(pod.uid, None)
        if pod.placeholder_for:
            if sign > 0:
                self._placeholders.add(pod.uid)
            else:
                self._placeholders.discard(pod.uid)
        node = self._target(pod)
        if node == _MANY:
            if sign > 0:
                self._many[pod.uid] = pod
            else:
                self._many.pop(pod.uid, None)
            return _MANY
        if node:
            if sign > 0:
                self._pinned.setdefault(node, {})[pod.uid] = pod
            else:
                self._pinned.get(node, {}).pop(pod.uid, None)
        return node

    # -- placing ----------------------------------------------------------------------

    def _rebuild(
        self, nodes: Sequence[Mapping[str, Any]], live: Sequence[PodInfo],
        reader: NodeReader, kept: KeptCapacity,
    ) -> Fleet:
        """Everything from scratch, as a pass from scratch starts."""
        before = self._on
        fleet = self.fleet = Fleet(nodes, live, self._config, reader, kept.fleet_copy())
        self._targets = {}
        in_flight = sorted((p for p in live if p.in_flight), key=flight_order)
        self._on, self._bound, self._pinned, self._many = {}, {}, {}, {}
        self._placed, self._placeholders = {}, set()
        for pod in live:
            if pod.node_name:
                self._index(pod, +1)
                self._on.setdefault(pod.node_name, {})[pod.uid] = placed(
                    pod.uid, pod.node_name, pod.demand, pod.requests)
        for pod, node in fleet.place_in_flight(in_flight):
            self._index(pod, +1)
            if node is not None:
                self._placed[pod.uid] = node
                self._on.setdefault(node, {})[pod.uid] = placed(
                    pod.uid, node, pod.demand, pod.requests)
        for node in before.keys() | self._on.keys():
            self._count(before.get(node, {}), self._on.get(node, {}))
        self.replaced = len(fleet.nodes)
        self._memo_limit = 2 * len(self._targets) + len(fleet.nodes) + _MEMO_FLOOR
        return fleet

    def _plan(self, node: str) -> dict[str, Placed]:
        """What one node counts now: its bound pods, then the pods in flight that may
        use only it, oldest first, each if its GPUs fit (`Fleet._first_fit` on one node)."""
        fleet = self.fleet
        assert fleet is not None
        facts = fleet.nodes.get(node)
        now: dict[str, Placed] = {}
        # Devices that claims hold count as used from the start, as `Fleet` counts them.
        used: dict[str, int] = dict(facts.held) if facts is not None else {}
        for pod in self._bound.get(node, {}).values():
            now[pod.uid] = placed(pod.uid, node, pod.demand, pod.requests)
            for resource, amount in pod.demand.items():
                used[resource] = used.get(resource, 0) + amount
        pinned = self._pinned.get(node, {})
        order = sorted(pinned.values(), key=flight_order)
        gpus: Mapping[str, int] = facts.gpus if facts is not None else {}
        for pod in order:
            if all(free_of(r, gpus.get(r, 0), used, gpus) >= a for r, a in pod.demand.items()):
                for resource, amount in pod.demand.items():
                    used[resource] = used.get(resource, 0) + amount
                now[pod.uid] = placed(pod.uid, node, pod.demand, pod.requests)
                self._placed[pod.uid] = node
            else:
                self._placed.pop(pod.uid, None)
        return now

    def _count(self, before: Mapping[str, Placed], now: Mapping[str, Placed]) -> None:
        for uid, entry in before.items():
            if now.get(uid) != entry:
                self.delta[entry] = self.delta.get(entry, 0) - 1
        for uid, entry in now.items():
            if before.get(uid) != entry:
                self.delta[entry] = self.delta.get(entry, 0) + 1
