"""The GPU capacity a cluster has, could ever have, and has free now, as node shapes.

`Capacity` holds GPU nodes compressed into *shapes*: nodes with the same GPU
allocatable, labels (minus per-node identity labels such as kubernetes.io/hostname,
`Config.node_identity_labels`),
taints and unschedulable flag are one shape with a count. Feasibility asks for
*bins*: (GPUs per node, number of nodes, which roles may use them), so a decision costs
the number of distinct shapes, not nodes. Eligibility per (placement, shape) is cached
(`shape_eligibility`).

Two views:
- **ever** (what feasibility rejects on): live nodes at their allocatable, plus every
  declared pool (`Config.pools`) up to its maxCount even with no Node today; live
  nodes recognised as a pool's own count toward its maxCount (`declared_pools`).
  Condition taints that come and go (not-ready, unreachable, cordon, pressure,
  autoscaler scale-down) and `spec.unschedulable` are ignored here: a node that is
  merely cordoned or restarting can run the gang later, and rejecting would be final.
- **free** (what `fits_now` answers on): live nodes only, allocatable minus the GPUs
  of pods bound to them (`add_pod` / `remove_pod`), with every taint and cordon in
  force, as the scheduler sees it at this moment.

Nodes without GPUs are kept apart (`plain` shapes, with their count and other
allocatable only): they never enter the GPU bins, and they are what `resource_fit`
refuses a gang of members without GPUs on (such a member may use any node), as are
declared pools without GPUs. Updates (`upsert_node`, `delete_node`, `add_pod`,
`remove_pod`) are O(1) in the number of nodes; a lock makes them safe against the
webhook's readers. Pure: plain Node dicts in, no I/O, no API calls.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..assigner.whole_nodes import free_of
from ..eligibility import uses_node_identity
from ..memo import BoundedMemo, IdentityMemo
from ..model import KubeObject, Placement, Verdict
from ..settings.config import Config
from .bound_use import bound_use
from .declared_pools import declare_pools, headrooms
from .node_facts import NodeFacts, read_node
from .node_resources import OtherResources, other_vector
from .node_shapes import Bin, GpuVector, NodeShape, gpu_vector
from .shape_eligibility import CACHE_LIMIT, ShapeEligibility, node_answer

#: (shape id, GPUs per node, number of nodes, declared pool rather than live nodes)
_Group = tuple[int, GpuVector, int, bool]


@dataclass
class _Node:
    shape_id: int
    identity: tuple[tuple[str, str], ...]
    allocatable: dict[str, int]
    #: Allocatable of the other resources (cpu, memory, ...), for `OtherResources`.
    other: tuple[tuple[str, int], ...] = ()


class Capacity:
    """Live GPU nodes, declared pools and bound-pod usage; see the module docstring."""

    def __init__(self, config: Config | None = None) -> None:
        self._config = config or Config()
        # Labels unique per node (Config.node_identity_labels) stay out of the shape,
        # else every node is its own shape; placements reading them go node by node.
        self._identity = self._config.node_identity_labels
        self._lock = threading.RLock()
        self._shape_ids: dict[NodeShape, int] = {}
        self._shapes: dict[int, NodeShape] = {}
        self._next_id = 0
        self._nodes: dict[str, _Node] = {}
        self._members: dict[int, dict[str, None]] = {}  # shape id → node names (ordered)
        self._pods: dict[str, tuple[str, dict[str, int]]] = {}
        self._used: dict[str, dict[str, int]] = {}  # node name → GPUs of bound pods
        self._free: dict[int, Counter[GpuVector]] = {}  # shape id → free vector → nodes
        #: Nodes without GPUs: name → entry, and shape id → node names.
        self._plain: dict[str, _Node] = {}
        self._plain_members: dict[int, dict[str, None]] = {}
        self._eligible = ShapeEligibility()
        self._groups_cache: dict[str, tuple[tuple[int, int], list[_Group]]] = {}
        # Two change counters: node/pool changes alter both views, bound-pod changes
        # only the free one, so the "ever" answers survive the constant pod churn.
        self._node_version = 0
        self._pod_version = 0
        self._bins_cache: dict[tuple[str, tuple[Placement, ...]], tuple[tuple[int, int], list[Bin]]]
        self._bins_cache = {}
        #: What feasibility answered about recent gangs on this capacity, by (view,
        #: version of the view) and gang object. 2,048: the gangs admitted between two
        #: changes of a view are far fewer, and an answer dropped is only recomputed.
        self.verdicts: IdentityMemo[tuple[str, tuple[int, int]], Verdict | None]
        self.verdicts = IdentityMemo(2048)
        #: "ever" answers by (version, the gang's value): a planner's kept capacity
        #: answers the waiting gangs of pass after pass, each pass's models new objects.
        self.ever_verdicts: BoundedMemo[tuple[tuple[int, int], Hashable], Verdict | None]
        self.ever_verdicts = BoundedMemo(2048)
        #: Non-GPU allocatable per shape, for the cpu/memory checks of `resource_fit`.
        self.other = OtherResources()
        #: The GPU pools, their other resources, the shape ids of pools without GPUs.
        self._pools, self._pool_other, self._plain_pools = declare_pools(
            self._config, self._intern, self._gpu_vector, self.other
        )

    # -- construction -------------------------------------------------------------

    @classmethod
    def from_nodes(cls, nodes: Iterable[KubeObject], config: Config | None = None) -> Capacity:
        """Capacity of these Node dicts plus the config's declared pools."""
        capacity = cls(config)
        for node in nodes:
            capacity.upsert_node(node)
        return capacity

    def copy(self) -> Capacity:
        """An independent capacity with the same nodes, pools and bound pods, far cheaper
        than building it node by node (a planning pass starts from the planner's). Node
        entries and shapes are shared (never changed once stored); caches start empty."""
        new = object.__new__(Capacity)
        new.__dict__.update(self.__dict__)
        with self._lock:
            new._lock = threading.RLock()
            new._shape_ids, new._shapes = dict(self._shape_ids), dict(self._shapes)
            new._nodes, new._plain = dict(self._nodes), dict(self._plain)
            new._members = {sid: dict(names) for sid, names in self._members.items()}
            new._plain_members = {s: dict(n) for s, n in self._plain_members.items()}
            new._plain_pools, new._pods = list(self._plain_pools), dict(self._pods)
            new._used = {name: dict(used) for name, used in self._used.items()}
            new._free = {sid: Counter(free) for sid, free in self._free.items()}
            new._pools = [replace(pool) for pool in self._pools]
            new._pool_other, new.other = list(self._pool_other), self.other.copy()
            new._eligible, new._groups_cache, new._bins_cache = ShapeEligibility(), {}, {}
            new.verdicts = IdentityMemo(self.verdicts.size)
            new.ever_verdicts = BoundedMemo(self.ever_verdicts.size)
        return new

    @property
    def config(self) -> Config:
        return self._config

    def _gpu_vector(self, amounts: Mapping[str, int]) -> GpuVector:
        return gpu_vector(amounts, self._config.is_gpu_resource)

    def _intern(self, shape: NodeShape) -> int:
        shape_id = self._shape_ids.get(shape)
        if shape_id is None:
            shape_id = self._next_id
            self._next_id += 1
            self._shape_ids[shape] = shape_id
            self._shapes[shape_id] = shape
        return shape_id

    def _shape_of(self, facts: NodeFacts) -> tuple[NodeShape, _Node]:
        labels = dict(facts.labels)
        identity = tuple(sorted((k, labels.pop(k)) for k in self._identity if k in labels))
        shape = NodeShape(
            gpus=self._gpu_vector(facts.gpus),
            labels=tuple(sorted(labels.items())),
            taints=tuple(sorted(facts.taints, key=lambda t: (t.key, t.effect, t.value))),
            unschedulable=facts.unschedulable,
        )
        return shape, _Node(-1, identity, dict(shape.gpus), other_vector(facts))

    # -- node and pod updates (O(1) each) ---------------------------------------------

    def upsert_node(self, node: KubeObject) -> None:
        """Add or update a Node; a node without GPUs is kept apart (module docstring).

        Raises InvalidObject naming the node and field when the Node is malformed;
        the capacity is then left unchanged.
        """
        self.upsert_facts(read_node(node, self._config))

    def upsert_facts(self, facts: NodeFacts) -> None:
        """`upsert_node` of a Node already read (`policies.cluster.node_facts.read_node`)."""
        name = facts.name
        shape, entry = self._shape_of(facts)
        with self._lock:
            self._remove_node(name)
            if not shape.gpus:
                entry.shape_id = self._intern(shape)
                self._plain[name] = entry
                self.other.add(entry.shape_id, entry.other)
                self._plain_members.setdefault(entry.shape_id, {})[name] = None
                self._node_changed()
                return
            entry.shape_id = self._intern(shape)
            self._nodes[name] = entry
            self.other.add(entry.shape_id, entry.other)
            self._members.setdefault(entry.shape_id, {})[name] = None
            self._free.setdefault(entry.shape_id, Counter())[self._free_vector(name)] += 1
            self._node_changed()

    def delete_node(self, name: str) -> None:
        """Forget a node by name; unknown names are ignored (deletes can repeat)."""
        with self._lock:
            self._remove_node(name)
            self._node_changed()

    def _node_changed(self) -> None:
        """Bump the node version and charge live nodes to the pools that own them."""
        self._node_version += 1
        if not self._pools:
            return
        live = [
            (self._shapes[sid].label_map, self._shapes[sid].gpus, len(members))
            for sid, members in self._members.items()
        ]
        for pool, vector, headroom in zip(
            self._pools, self._pool_other, headrooms(self._pools, live), strict=True
        ):
            if headroom != pool.headroom:
                self.other.add(pool.shape_id, vector, headroom - pool.headroom)
                pool.headroom = headroom

    def _remove_node(self, name: str) -> None:
        entry = self._nodes.pop(name, None)
        if entry is None:
            self._remove_plain(name)
            return
        sid = entry.shape_id
        self.other.remove(sid, entry.other)
        members = self._members[sid]
        del members[name]
        free = self._free[sid]
        vector = self._free_vector_of(entry, name)
        free[vector] -= 1
        if free[vector] <= 0:
            del free[vector]
        if not members:
            del self._members[sid]
            del self._free[sid]
            if all(pool.shape_id != sid for pool in self._pools):
                self._forget_shape(sid)

    def _remove_plain(self, name: str) -> None:
        entry = self._plain.pop(name, None)
        if entry is None:
            return
        sid = entry.shape_id
        self.other.remove(sid, entry.other)
        members = self._plain_members[sid]
        del members[name]
        if not members:
            del self._plain_members[sid]
            if sid not in self._plain_pools:
                self._forget_shape(sid)

    def _forget_shape(self, shape_id: int) -> None:
        shape = self._shapes.pop(shape_id)
        del self._shape_ids[shape]
        self._eligible.forget(shape_id)

    def add_pod(self, uid: str, node_name: str, demand: Mapping[str, int]) -> None:
        """Count a pod bound to `node_name` as using its GPU `demand` (replaces by uid)."""
        gpus = dict(self._gpu_vector(demand))
        with self._lock:
            self._unbind(uid)
            if not gpus:
                return
            self._pods[uid] = (node_name, gpus)
            self._move(node_name, gpus, +1)

    def add_pods(self, pods: Iterable[tuple[str, str, Mapping[str, int]]]) -> None:
        """`add_pod` of many (uid, node, demand) at once: a node's free amounts move once
        for all the pods added to it, not once per pod (a planning pass adds thousands)."""
        summed: dict[str, dict[str, int]] = {}
        with self._lock:
            for uid, node_name, demand in pods:
                self._unbind(uid)
                gpus = dict(self._gpu_vector(demand))
                if not gpus:
                    continue
                self._pods[uid] = (node_name, gpus)
                total = summed.setdefault(node_name, {})
                for resource, amount in gpus.items():
                    total[resource] = total.get(resource, 0) + amount
            for node_name, gpus in summed.items():
                self._move(node_name, gpus, +1)

    def add_pod_object(self, pod: KubeObject) -> None:
        """`add_pod` for a Pod dict (`bound_use`); an unbound or finished pod is removed.
        Raises InvalidObject for a malformed spec."""
        uid, node_name, demand = bound_use(pod, self._config)
        if node_name:
            self.add_pod(uid, node_name, demand)
        else:
            self.remove_pod(uid)

    def remove_pod(self, uid: str) -> None:
        """Stop counting a pod (deleted, finished or rebound); unknown uids are ignored."""
        with self._lock:
            self._unbind(uid)

    def _unbind(self, uid: str) -> None:
        bound = self._pods.pop(uid, None)
        if bound is not None:
            self._move(bound[0], bound[1], -1)

    def _move(self, node_name: str, gpus: Mapping[str, int], sign: int) -> None:
        entry = self._nodes.get(node_name)
        if entry is not None:
            free = self._free[entry.shape_id]
            old = self._free_vector_of(entry, node_name)
            free[old] -= 1
            if free[old] <= 0:
                del free[old]
        used = self._used.setdefault(node_name, {})
        for resource, amount in gpus.items():
            used[resource] = used.get(resource, 0) + sign * amount
            if used[resource] <= 0:
                del used[resource]
        if not used:
            del self._used[node_name]
        if entry is not None:
            self._free[entry.shape_id][self._free_vector_of(entry, node_name)] += 1
        self._pod_version += 1

    def _free_vector(self, name: str) -> GpuVector:
        return self._free_vector_of(self._nodes[name], name)

    def _free_vector_of(self, entry: _Node, name: str) -> GpuVector:
        used = self._used.get(name, {})
        # Usage above allocatable happens briefly (allocatable shrank); free is then 0.
        # A DRA class's whole node and its devices are tied (`whole_nodes`).
        return tuple(
            (resource, free_of(resource, amount, used, entry.allocatable))
            for resource, amount in entry.allocatable.items()
        )

    # -- queries -------------------------------------------------------------------------

    @property
    def node_count(self) -> int:
        """GPU nodes known now (pools not included)."""
        return len(self._nodes)

    @property
    def plain_count(self) -> int:
        """Nodes without GPUs known now (pools not included)."""
        return len(self._plain)

    @property
    def shape_count(self) -> int:
        return len(self._members)

    @property
    def unknown(self) -> bool:
        """No GPU node and no declared pool: the cluster's GPUs are not known at all.

        Feasibility then warns and admits instead of rejecting (docs/policy.md, "What
        gets rejected, and why").
        """
        return not self._nodes and not self._pools

    def gpu_resources(self) -> frozenset[str]:
        """Every GPU resource some node or pool offers."""
        with self._lock:
            names = {r for shape in self._shapes.values() for r, _ in shape.gpus}
        return frozenset(names)

    def _groups(self, view: str) -> list[_Group]:
        """The groups of a view; cached until the next change."""
        version = self.version(view)
        cached = self._groups_cache.get(view)
        if cached is not None and cached[0] == version:
            return cached[1]
        groups: list[_Group] = []
        if view == "ever":
            for sid, members in self._members.items():
                groups.append((sid, self._shapes[sid].gpus, len(members), False))
            for pool in self._pools:
                if pool.headroom > 0:
                    groups.append((pool.shape_id, pool.gpus, pool.headroom, True))
        else:
            for sid, vectors in self._free.items():
                for vector, count in vectors.items():
                    if count > 0 and any(amount > 0 for _, amount in vector):
                        groups.append((sid, vector, count, False))
        self._groups_cache[view] = (version, groups)
        return groups

    def version(self, view: str) -> tuple[int, int]:
        """Changes whenever something the view sees changes (nodes and pools; "free"
        also bound pods), so answers computed on the view can be cached by it."""
        return (self._node_version, self._pod_version if view == "free" else 0)

    def _shape_eligible(
        self, view: str, placement: Placement, answers: dict[int, bool], shape_id: int
    ) -> bool:
        return self._eligible.of_shape(view, placement, answers, shape_id, self._shapes[shape_id])

    def _node_eligible(self, view: str, placement: Placement, shape_id: int, name: str) -> bool:
        entry = self._nodes.get(name)
        identity = entry.identity if entry is not None else ()
        return node_answer(view, placement, self._shapes[shape_id], name, identity)

    def bins(self, placements: Sequence[Placement], *, view: str = "ever") -> list[Bin]:
        """Nodes grouped by (GPUs per node, which of `placements` may use them).

        `view` is "ever" (allocatable, pools, transient taints ignored) or "free"
        (free GPUs now, every taint in force). Bins with no eligible placement are
        kept: messages count them as nodes the gang may not use.
        """
        if view not in ("ever", "free"):
            raise ValueError(f"view must be 'ever' or 'free', got {view!r}")
        key = (view, tuple(placements))
        with self._lock:
            version = self.version(view)
            cached = self._bins_cache.get(key)
            if cached is not None and cached[0] == version:
                return list(cached[1])
            bins = self._compute_bins(view, placements)
            if len(self._bins_cache) >= CACHE_LIMIT:
                self._bins_cache.clear()
            self._bins_cache[key] = (version, bins)
            return list(bins)

    def _compute_bins(self, view: str, placements: Sequence[Placement]) -> list[Bin]:
        per_node = [uses_node_identity(p, self._identity) for p in placements]
        answers = self._eligible.answers
        shared_placements = [
            (i, p, answers(view, p)) for i, p in enumerate(placements) if not per_node[i]
        ]
        merged: dict[tuple[GpuVector, frozenset[int]], int] = {}
        for sid, vector, count, is_pool in self._groups(view):
            shared = frozenset(
                i
                for i, p, answers in shared_placements
                if self._shape_eligible(view, p, answers, sid)
            )
            if not any(per_node):
                splits: Iterable[tuple[frozenset[int], int]] = ((frozenset(), count),)
            else:
                splits = self._split(view, placements, per_node, (sid, vector, count, is_pool))
            for signature, n in splits:
                merged_key = (vector, shared | signature)
                merged[merged_key] = merged.get(merged_key, 0) + n
        return [Bin(gpus=v, count=n, eligible=e) for (v, e), n in merged.items() if n > 0]

    def _split(
        self,
        view: str,
        placements: Sequence[Placement],
        per_node: Sequence[bool],
        group: _Group,
    ) -> Iterator[tuple[frozenset[int], int]]:
        """Per-node eligibility for the placements that read node identity."""
        sid, vector, count, is_pool = group
        indexes = [i for i, flag in enumerate(per_node) if flag]
        if is_pool:
            # Pool nodes do not exist yet: no name, no hostname label to match.
            yield (
                frozenset(i for i in indexes if self._node_eligible(view, placements[i], sid, "")),
                count,
            )
            return
        signatures: Counter[frozenset[int]] = Counter()
        for name in self._members.get(sid, {}):
            if view == "free" and self._free_vector(name) != vector:
                continue
            signatures[
                frozenset(i for i in indexes if self._node_eligible(view, placements[i], sid, name))
            ] += 1
        yield from signatures.items()

    def shape_gpus(self, shape_id: int) -> GpuVector:
        return self._shapes[shape_id].gpus

    def ever_groups(self) -> list[tuple[NodeShape, int, int, bool]]:
        """(shape, shape id, nodes, declared pool) of the "ever" view."""
        with self._lock:
            return [(self._shapes[s], s, n, pool) for s, _, n, pool in self._groups("ever")]

    def eligible_shapes(self, placement: Placement, *, plain: bool = False) -> list[int] | None:
        """Shape ids `placement` may use on the "ever" view (GPU shapes, and with `plain`
        those without GPUs too: a member without GPUs may use any node); None when it
        reads node identity (answered node by node, which the callers do not need)."""
        if uses_node_identity(placement, self._identity):
            return None
        with self._lock:
            answers = self._eligible.answers("ever", placement)
            sids = {sid for sid, _, _, _ in self._groups("ever")}
            if plain:
                sids.update(self._plain_members)
                sids.update(self._plain_pools)
            return sorted(s for s in sids if self._shape_eligible("ever", placement, answers, s))

    def describe(self) -> dict[str, Any]:
        """A small summary for status pages and logs."""
        with self._lock:
            return {
                "nodes": len(self._nodes),
                "nodesWithoutGpus": len(self._plain),
                "shapes": len(self._members),
                "pools": len(self._pools),
                "boundPods": len(self._pods),
            }
