"""Free GPUs (and every other resource) node by node, for one planning pass.

The policy core's `Capacity` answers "does this gang fit the free GPUs now?" over node
shapes, but it does not say *which* node a pod would take. The controller needs that
in two places: to count pods that are already free to schedule but not bound yet
("in flight") as using GPUs on some node, so two gangs are never released into the
same free GPUs; and to say in messages how many GPUs are free on the nodes a gang may
use. `Fleet` keeps per-node free GPUs, places pods first-fit on eligible nodes, and
mirrors every placement into a `Capacity` so `fits_now` sees the same usage. It also
keeps every other resource a pod requests (cpu, memory, ephemeral-storage, the pod
slot), so the assigner (`policies.assigner`) sees what is free on each node
(`views`) and a pod is placed only where all of it fits.

Nodes without GPUs are kept too: a gang none of whose members asks for GPUs may use
any node, and is placed, pinned and held by what it requests (`plain=True` in
`eligible`, `views`, `groups`, `reserve`). Everything else sees GPU nodes only, as
before: a GPU member cannot use a node without GPUs, and a GPU gang never holds one.

For the assigner the fleet also keeps its nodes grouped (`groups`): nodes of one
*class* (labels other than per-node identity, taints, readiness, cordon) with equal
free amounts, each group a sorted run of node ranks, moved from group to group as pods
are placed. A gang whose members read no node identity is then assigned over a few
dozen groups instead of every node (`placement.assign_groups`), and nothing per node is
rebuilt for it.

Devices that allocated ResourceClaims hold with no bound pod counting them
(`NodeFacts.held`) are used on their node from the start, like a bound pod's.

Pure: Node dicts (read by `policies.cluster.node_facts`) and `PodInfo`s in; eligibility comes from
`policies.eligibility`.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..assigner.assign import Group, NodeView, free_key
from ..assigner.pin import pin_of
from ..assigner.whole_nodes import free_amounts, free_of
from ..eligibility import named_nodes, node_eligible, uses_node_identity
from ..errors import PolicyError
from ..model import Placement
from ..settings.config import Config
from .capacity import Capacity
from .node_facts import NodeFacts, read_node
from .observed_gangs import PodInfo

_Free = tuple[tuple[str, int], ...]
#: Before a node's name: the uid its claims' held devices are counted under.
HELD_UID = "resourceclaims:"
_NONE: Mapping[str, int] = {}
#: Node dict → its facts (`nodes.read_node` with the pass's config, or a cache of it).
NodeReader = Callable[[Mapping[str, Any]], NodeFacts]
#: What decides a node's eligibility for a pod that reads no node identity.
_Class = tuple[tuple[tuple[str, str], ...], tuple[Any, ...], bool, bool]
#: One change `Fleet.log` records: ("add" | "unplace", uid, node, demand, requests) or
#: ("reserve", names).
FleetOp = tuple[Any, ...]


class Fleet:
    """Per-node free GPUs plus a `Capacity` kept in step with every placement.

    Built for a pass (O(nodes + pods)), or kept by a planner between passes
    (`KeptFleet`) and handed to each pass as a `copy`: a pass changes only its copy.
    With `log` set, every change is recorded, and `replay` does recorded changes
    again on another fleet (how `release.replay` re-uses a gang's decision).
    """

    def __init__(
        self,
        nodes: Iterable[Mapping[str, Any]],
        pods: Iterable[PodInfo],
        config: Config,
        reader: NodeReader | None = None,
        capacity: Capacity | None = None,
    ) -> None:
        """`capacity`: the GPU nodes of `nodes` with no pod counted, this fleet's to
        fill (a `KeptCapacity.fleet_copy()`); built here from `nodes` when None."""
        self._config = config
        self.nodes: dict[str, NodeFacts] = {}
        self.capacity = Capacity(config) if capacity is None else capacity
        read = reader or (lambda raw: read_node(raw, config))
        for raw in nodes:
            try:
                facts = read(raw)
            except PolicyError:
                continue  # a node that cannot be read is no place for a gang
            self.nodes[facts.name] = facts
            if facts.gpus and capacity is None:
                # `fits_now` counts GPUs: a node without them is nothing to it.
                self.capacity.upsert_facts(facts)
        self._used: dict[str, dict[str, int]] = {}
        #: Every resource (GPUs included) that pods placed on a node request.
        self._taken: dict[str, dict[str, int]] = {}
        self._eligible: dict[tuple[Placement, bool], tuple[str, ...]] = {}
        self._split: dict[tuple[Placement, bool, bool, int], tuple[str, ...]] = {}
        self._reserved: set[str] = set()
        self._views: dict[str, NodeView] = {}
        #: GPU nodes grouped, and every node grouped (built only for a gang without GPUs).
        self._grouping: _Grouping | None = None
        self._all: _Grouping | None = None
        #: When a list: every `add`, `unplace` and `reserve` is appended to it (a
        #: planner replays a gang's decision from it: `release.replay`).
        self.log: list[FleetOp] | None = None
        self._add_many((p.uid, p.node_name, p.demand, p.requests) for p in pods if p.node_name)
        # Devices that claims hold with no bound pod counting them: used like a pod's.
        self._add_many((f"{HELD_UID}{f.name}", f.name, f.held, f.held)
                       for f in self.nodes.values() if f.held)

    def replay(self, ops: Iterable[FleetOp]) -> None:
        """Do these `log` entries again: pods out, pods in (moved once per node), nodes
        held; the end state is theirs in order (a held node counts pods whenever)."""
        ops = list(ops)
        for op in ops:
            if op[0] == "unplace":
                self.unplace(op[1], op[2], op[3], op[4])
        self._add_many(op[1:] for op in ops if op[0] == "add")
        for op in ops:
            if op[0] == "reserve":
                self.reserve_names(op[1])

    def copy(self) -> Fleet:
        """An independent fleet of the same nodes, pods and holds (a planner's kept start,
        each pass changing its own copy); what nodes alone decide is shared."""
        new = object.__new__(Fleet)
        new.__dict__.update(self.__dict__)
        new.capacity = self.capacity.copy()
        new._used = {n: dict(u) for n, u in self._used.items()}
        new._taken = {n: dict(t) for n, t in self._taken.items()}
        new._eligible, new._split = dict(self._eligible), dict(self._split)
        new._reserved, new._views, new.log = set(self._reserved), dict(self._views), None
        new._grouping = None if self._grouping is None else self._grouping.copy(new)
        new._all = None if self._all is None else self._all.copy(new)
        return new

    def _add_many(
        self, entries: Iterable[tuple[str, str, Mapping[str, int], Mapping[str, int] | None]],
        *, counted: bool = False,
    ) -> None:
        """`add` of many pods, the capacity and each node's view and group moved once
        per node rather than once per pod (`counted`: their use of the nodes is
        counted already)."""
        batch: list[tuple[str, str, Mapping[str, int]]] = []
        touched: dict[str, None] = {}
        for uid, node_name, demand, requests in entries:
            if not counted:
                self._count(node_name, demand, requests)
            batch.append((uid, node_name, demand))
            touched[node_name] = None
        self.capacity.add_pods(batch)
        for node_name in touched:
            self._changed(node_name)

    def _count(
        self, node_name: str, demand: Mapping[str, int], requests: Mapping[str, int] | None
    ) -> None:
        used = self._used.setdefault(node_name, {})
        for resource, amount in demand.items():
            used[resource] = used.get(resource, 0) + amount
        taken = self._taken.setdefault(node_name, {})
        for resource, amount in (demand if requests is None else requests).items():
            taken[resource] = taken.get(resource, 0) + amount

    def add(
        self,
        uid: str,
        node_name: str,
        demand: Mapping[str, int],
        requests: Mapping[str, int] | None = None,
    ) -> None:
        if self.log is not None:
            self.log.append(("add", uid, node_name, demand, requests))
        self._count(node_name, demand, requests)
        self.capacity.add_pod(uid, node_name, demand)
        self._changed(node_name)

    def add_all(
        self, entries: Sequence[tuple[str, str, Mapping[str, int], Mapping[str, int] | None]]
    ) -> None:
        """`add` of each (uid, node, demand, requests), each node moved once (a gang's)."""
        if self.log is not None:
            self.log.extend(("add", *entry) for entry in entries)
        self._add_many(entries)

    def unplace(
        self,
        uid: str,
        node_name: str,
        demand: Mapping[str, int],
        requests: Mapping[str, int] | None = None,
    ) -> None:
        """Undo `add`/`place` of a pod (a trial placement that was not kept)."""
        if self.log is not None:
            self.log.append(("unplace", uid, node_name, demand, requests))
        used = self._used.get(node_name, {})
        for resource, amount in demand.items():
            used[resource] = used.get(resource, 0) - amount
        taken = self._taken.get(node_name, {})
        for resource, amount in (demand if requests is None else requests).items():
            taken[resource] = taken.get(resource, 0) - amount
        self.capacity.remove_pod(uid)
        self._changed(node_name)

    def _changed(self, node_name: str) -> None:
        """What is free on the node changed: its view and its group follow."""
        self._views.pop(node_name, None)
        if node_name in self.nodes:
            for grouping in (self._grouping, self._all):
                if grouping is not None:
                    grouping.move(node_name, free_key(self.free_all(node_name)))

    def free_all(self, node_name: str) -> dict[str, int]:
        """Every resource still free on the node (allocatable less what pods take)."""
        facts = self.nodes[node_name]
        taken = self._taken.get(node_name, {})
        return free_amounts(facts.allocatable, taken)

    def view(self, name: str) -> NodeView:
        """One node as the assigner sees it now (kept until what is free on it changes)."""
        view = self._views.get(name)
        if view is None:
            facts = self.nodes[name]
            view = self._views[name] = NodeView(
                name=name,
                labels=facts.labels,
                taints=facts.scheduling_taints,
                free=self.free_all(name),
                ready=facts.ready,
                unschedulable=facts.unschedulable,
            )
        return view

    def views(self, *, plain: bool = False) -> list[NodeView]:
        """The GPU nodes (every node, with `plain`) not held for an earlier gang, as the
        assigner sees them now."""
        names = self.grouping_of(plain).names
        return [self.view(name) for name in names if name not in self._reserved]

    @property
    def grouping(self) -> _Grouping:
        """The GPU nodes grouped (`grouping_of(False)`)."""
        return self.grouping_of(False)

    def grouping_of(self, plain: bool) -> _Grouping:
        """GPU nodes grouped, or every node with `plain`; built on first use, so GPU
        gangs never pay for the nodes without GPUs."""
        if plain:
            if self._all is None:
                self._all = _Grouping(self, plain=True)
            return self._all
        if self._grouping is None:
            self._grouping = _Grouping(self, plain=False)
        return self._grouping

    def groups(self, *, plain: bool = False) -> tuple[list[Group], list[str]]:
        """The GPU nodes (every node, with `plain`) not held for an earlier gang, grouped
        for `assign_groups`, and the names the groups index (every node, in name order)."""
        grouping = self.grouping_of(plain)
        return grouping.groups(), grouping.names

    @property
    def identity_labels(self) -> tuple[str, ...]:
        """Labels unique per node: a placement reading one is judged node by node."""
        return self._config.node_identity_labels

    def free(self, node_name: str) -> dict[str, int]:
        facts = self.nodes[node_name]
        return free_amounts(facts.gpus, self._used.get(node_name, {}))

    def eligible(
        self, placement: Placement, *, held: bool = False, plain: bool = False
    ) -> tuple[str, ...]:
        """GPU nodes (every node, with `plain`) a pod with this placement may use, in
        name order.

        Held (reserved) nodes are left out, or, with `held=True`, are the only ones kept.
        """
        names = self.may_use(placement, plain=plain)
        # Held nodes only ever grow within a pass: their count dates the split.
        key = (placement, held, plain, len(self._reserved))
        split = self._split.get(key)
        if split is None:
            split = self._split[key] = tuple(n for n in names if (n in self._reserved) == held)
        return split

    def may_use(self, placement: Placement, *, plain: bool = False) -> tuple[str, ...]:
        """Every GPU node (every node, with `plain`) a pod with this placement may use,
        held or not, in name order (kept for the pass: eligibility never changes in it)."""
        names = self._eligible.get((placement, plain))
        if names is None:
            names = self._eligible[(placement, plain)] = self._eligible_names(placement, plain)
        return names

    def _eligible_names(self, placement: Placement, plain: bool) -> tuple[str, ...]:
        identity = self.identity_labels
        grouping = self.grouping_of(plain)
        named = named_nodes(placement)
        pinned = [(k, v) for k, v in placement.node_selector if k in identity]
        if named is not None:
            # A pin (matchFields metadata.name) names its node: look it up, do not scan.
            candidates = [n for n in sorted(named) if grouping.has(n)]
        elif pinned:
            # So does a label unique per node (an earlier version's hostname pin).
            candidates = sorted(grouping.with_label(*pinned[0]))
        elif uses_node_identity(placement, identity):
            candidates = grouping.names
        else:
            # Nodes of one class are eligible alike: judge one of each.
            candidates = grouping.of_classes(
                lambda like: node_eligible(
                    placement, node_name=like.name, labels=like.labels,
                    taints=like.scheduling_taints,
                )
            )
            return tuple(candidates)
        return tuple(
            name
            for name in candidates
            if node_eligible(
                placement,
                node_name=name,
                labels=self.nodes[name].labels,
                taints=self.nodes[name].scheduling_taints,
            )
        )

    def place_in_flight(self, pods: Iterable[PodInfo]) -> list[tuple[PodInfo, str | None]]:
        """`place` each pod in turn (not pinnable), the capacity and the nodes' views
        and groups moved once per node at the end: what a pass does first with the
        thousands of pods released and not bound yet. Each pod is judged against the
        pods placed before it, as by `place`."""
        out: list[tuple[PodInfo, str | None]] = []
        batch: list[tuple[str, str, Mapping[str, int], Mapping[str, int]]] = []
        for pod in pods:
            node = self._first_fit(pod, pinnable=False)
            if node is not None:
                # Counted now (the next pod's test reads it); the rest once, below.
                self._count(node, pod.demand, pod.requests)
                batch.append((pod.uid, node, pod.demand, pod.requests))
            out.append((pod, node))
        self._add_many(batch, counted=True)
        return out

    def place(self, pod: PodInfo, *, pinnable: bool = False) -> str | None:
        """Take room for a pod on the first eligible node where it fits; None if none.

        A pod without GPUs is placed only when it is pinned to one node (`pin_of`), or
        with `pinnable` (a member of a gang without GPUs, pinned where it is placed);
        it may use any node. With `pinnable`, only nodes a pin may name are used
        (Ready, uncordoned) and every resource the pod requests must fit.
        """
        name = self._first_fit(pod, pinnable=pinnable)
        if name is not None:
            self.add(pod.uid, name, pod.demand, pod.requests)
        return name

    def _first_fit(self, pod: PodInfo, *, pinnable: bool) -> str | None:
        """The node `place` takes for the pod (nothing taken yet); None if none."""
        plain = not pod.demand
        if plain and not pinnable and pin_of(pod.placement) is None:
            return None
        demand = pod.demand.items()
        for name in self.eligible(pod.placement, plain=plain):
            # `free(name)` without building it: this runs for every pod in flight.
            gpus, used = self.nodes[name].gpus, self._used.get(name, _NONE)
            if not all(free_of(r, gpus.get(r, 0), used, gpus) >= a for r, a in demand):
                continue
            if pinnable:
                if not self.nodes[name].ready:
                    continue
                left = self.free_all(name)
                if not all(left.get(r, 0) >= a for r, a in pod.requests.items()):
                    continue
            return name
        return None

    def free_for(
        self, placements: Sequence[Placement], resource: str, *, plain: bool = False
    ) -> int:
        """Free units of `resource` on nodes at least one of `placements` may use."""
        names = {n for p in placements for n in self.eligible(p, plain=plain)}
        if plain:
            return sum(self.free_all(n).get(resource, 0) for n in names)
        return sum(self.free(n).get(resource, 0) for n in names)

    def reserve(self, placements: Sequence[Placement], *, plain: bool = False) -> tuple[str, ...]:
        """Hold every node these placements may use (GPU nodes only, unless `plain`):
        later gangs must fit elsewhere."""
        return self.reserve_names(
            sorted({n for p in placements for n in self.eligible(p, plain=plain)})
        )

    def reserve_names(self, names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
        """Hold these nodes (`reserve`, the names chosen)."""
        if self.log is not None:
            self.log.append(("reserve", tuple(names)))
        for name in names:
            self._reserved.add(name)
            self.capacity.delete_node(name)
            for grouping in (self._grouping, self._all):
                if grouping is not None:
                    grouping.drop(name)
        return tuple(names)


class _Grouping:
    """The fleet's GPU nodes (every node, with `plain`) not held, by (class, free
    amounts): sorted runs of ranks."""

    def __init__(self, fleet: Fleet, *, plain: bool) -> None:
        self._fleet = fleet
        self.names = sorted(n for n, facts in fleet.nodes.items() if plain or facts.gpus)
        self._rank = {name: rank for rank, name in enumerate(self.names)}
        identity = set(fleet.identity_labels)
        classes: dict[_Class, int] = {}
        #: Per class, the node whose labels stand for the class.
        self._like: list[str] = []
        self._class: dict[str, int] = {}
        self._key: dict[str, _Free] = {}
        self._runs: dict[tuple[int, _Free], list[int]] = {}
        self._likes: dict[tuple[int, _Free], NodeView] = {}
        self._by_label: dict[str, dict[str, list[str]]] = {}
        for name in self.names:
            facts = fleet.nodes[name]
            kind: _Class = (
                tuple(sorted((k, v) for k, v in facts.labels.items() if k not in identity)),
                facts.scheduling_taints,
                facts.ready,
                facts.unschedulable,
            )
            if kind not in classes:
                classes[kind] = len(self._like)
                self._like.append(name)
            self._class[name] = classes[kind]
            if name in fleet._reserved:
                continue
            key = self._key[name] = free_key(fleet.free_all(name))
            self._runs.setdefault((self._class[name], key), []).append(self._rank[name])

    def copy(self, fleet: Fleet) -> _Grouping:
        """The same grouping for `fleet` (a copy of this one's fleet): what nodes alone
        decide is shared, the groups are its own."""
        new = object.__new__(_Grouping)
        new.__dict__.update(self.__dict__)
        new._fleet, new._key, new._likes = fleet, dict(self._key), dict(self._likes)
        new._runs = {group: list(run) for group, run in self._runs.items()}
        return new

    def has(self, name: str) -> bool:
        """Whether `name` is one of the grouping's nodes."""
        return name in self._rank

    def with_label(self, key: str, value: str) -> list[str]:
        """The nodes whose label `key` (one unique per node) is `value`."""
        index = self._by_label.get(key)
        if index is None:
            index = self._by_label[key] = {}
            for name in self.names:
                labels = self._fleet.nodes[name].labels
                if key in labels:
                    index.setdefault(labels[key], []).append(name)
        return index.get(value, [])

    def of_classes(self, keep: Callable[[NodeFacts], bool]) -> list[str]:
        """Every node (in name order) of the classes whose first node `keep` accepts."""
        chosen = {c for c, name in enumerate(self._like) if keep(self._fleet.nodes[name])}
        return [name for name in self.names if self._class[name] in chosen]

    def drop(self, name: str) -> None:
        key = self._key.pop(name, None)
        if key is not None:
            run = self._runs[(self._class[name], key)]
            del run[bisect_left(run, self._rank[name])]

    def move(self, name: str, key: _Free) -> None:
        if name not in self._key or self._key[name] == key:
            return
        self.drop(name)
        self._key[name] = key
        insort(self._runs.setdefault((self._class[name], key), []), self._rank[name])

    def groups(self) -> list[Group]:
        out = []
        for group, run in self._runs.items():
            if not run:
                continue
            like = self._likes.get(group)
            if like is None:
                facts = self._fleet.nodes[self._like[group[0]]]
                like = self._likes[group] = NodeView(
                    name=facts.name,
                    labels=facts.labels,
                    taints=facts.scheduling_taints,
                    free=dict(group[1]),
                    ready=facts.ready,
                    unschedulable=facts.unschedulable,
                )
            out.append(Group(like, run))
        return out
