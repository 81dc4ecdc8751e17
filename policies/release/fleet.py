"""Free GPUs (and every other resource) node by node, for one planning pass.

The policy core's `Capacity` answers "does this gang fit the free GPUs now?" over node
shapes, but it does not say *which* node a pod would take. The controller needs that
in two places: to count pods that are already free to schedule but not bound yet
("in flight") as using GPUs on some node, so two gangs are never released into the
same free GPUs; and to say in messages how many GPUs are free on the nodes a gang may
use. `Fleet` keeps per-node free GPUs, places pods first-fit on eligible nodes, and
mirrors every placement into a `Capacity` so `fits_now` sees the same usage. It also
keeps every other resource a pod requests (cpu, memory, ephemeral-storage, the pod
slot), so the assigner (`policies.placement`) sees what is free on each node
(`views`) and a pod is placed only where all of it fits.

Pure: Node dicts (read by `policies.nodes`) and `PodInfo`s in; eligibility comes from
`policies.eligibility`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..capacity import Capacity
from ..config import Config
from ..eligibility import node_eligible
from ..errors import PolicyError
from ..model import Placement
from ..names import PIN_LABEL
from ..nodes import NodeFacts, read_node
from ..placement.assign import NodeView
from .observe import PodInfo


class Fleet:
    """Per-node free GPUs plus a `Capacity` kept in step with every placement.

    Built fresh for each planning pass (cheap: O(nodes + pods)); mutated only while
    the pass simulates placements, never shared between passes.
    """

    def __init__(
        self, nodes: Iterable[Mapping[str, Any]], pods: Iterable[PodInfo], config: Config
    ) -> None:
        self._config = config
        self.nodes: dict[str, NodeFacts] = {}
        self.capacity = Capacity(config)
        for raw in nodes:
            try:
                facts = read_node(raw, config)
            except PolicyError:
                continue  # a node that cannot be read is no place for a gang
            if facts.gpus:
                self.nodes[facts.name] = facts
                self.capacity.upsert_facts(facts)
        self._used: dict[str, dict[str, int]] = {}
        #: Every resource (GPUs included) that pods placed on a node request.
        self._taken: dict[str, dict[str, int]] = {}
        self._eligible: dict[Placement, tuple[str, ...]] = {}
        self._reserved: set[str] = set()
        for pod in pods:
            if pod.node_name:
                self.add(pod.uid, pod.node_name, pod.demand, pod.requests)

    def add(
        self,
        uid: str,
        node_name: str,
        demand: Mapping[str, int],
        requests: Mapping[str, int] | None = None,
    ) -> None:
        used = self._used.setdefault(node_name, {})
        for resource, amount in demand.items():
            used[resource] = used.get(resource, 0) + amount
        taken = self._taken.setdefault(node_name, {})
        for resource, amount in (demand if requests is None else requests).items():
            taken[resource] = taken.get(resource, 0) + amount
        self.capacity.add_pod(uid, node_name, demand)

    def unplace(
        self,
        uid: str,
        node_name: str,
        demand: Mapping[str, int],
        requests: Mapping[str, int] | None = None,
    ) -> None:
        """Undo `add`/`place` of a pod (a trial placement that was not kept)."""
        used = self._used.get(node_name, {})
        for resource, amount in demand.items():
            used[resource] = used.get(resource, 0) - amount
        taken = self._taken.get(node_name, {})
        for resource, amount in (demand if requests is None else requests).items():
            taken[resource] = taken.get(resource, 0) - amount
        self.capacity.remove_pod(uid)

    def free_all(self, node_name: str) -> dict[str, int]:
        """Every resource still free on the node (allocatable less what pods take)."""
        facts = self.nodes[node_name]
        taken = self._taken.get(node_name, {})
        return {r: max(0, a - taken.get(r, 0)) for r, a in facts.allocatable.items()}

    def views(self) -> list[NodeView]:
        """The nodes not held for an earlier gang, as the assigner sees them now."""
        return [
            NodeView(
                name=name,
                labels=facts.labels,
                taints=facts.scheduling_taints,
                free=self.free_all(name),
                ready=facts.ready,
                unschedulable=facts.unschedulable,
                hostname=facts.labels.get(PIN_LABEL, ""),
            )
            for name, facts in sorted(self.nodes.items())
            if name not in self._reserved
        ]

    def free(self, node_name: str) -> dict[str, int]:
        facts = self.nodes[node_name]
        used = self._used.get(node_name, {})
        return {r: max(0, a - used.get(r, 0)) for r, a in facts.gpus.items()}

    def eligible(self, placement: Placement, *, held: bool = False) -> tuple[str, ...]:
        """Nodes a pod with this placement may use, in name order.

        Held (reserved) nodes are left out, or, with `held=True`, are the only ones kept.
        """
        names = self._eligible.get(placement)
        if names is None:
            names = self._eligible[placement] = tuple(
                sorted(
                    name
                    for name, facts in self.nodes.items()
                    if node_eligible(
                        placement,
                        node_name=name,
                        labels=facts.labels,
                        taints=facts.scheduling_taints,
                    )
                )
            )
        return tuple(n for n in names if (n in self._reserved) == held)

    def place(self, pod: PodInfo, *, pinnable: bool = False) -> str | None:
        """Take room for a pod on the first eligible node where it fits; None if none.

        A pod without GPUs is placed only when its nodeSelector names one node (it
        may run on any node otherwise, most likely one without GPUs). With
        `pinnable`, only nodes a pin may name are used (Ready, uncordoned, with a
        hostname label) and every resource the pod requests must fit.
        """
        if not pod.demand and PIN_LABEL not in dict(pod.placement.node_selector):
            return None
        for name in self.eligible(pod.placement):
            free = self.free(name)
            if not all(free.get(r, 0) >= a for r, a in pod.demand.items()):
                continue
            if pinnable:
                facts = self.nodes[name]
                if not (facts.ready and facts.labels.get(PIN_LABEL)):
                    continue
                left = self.free_all(name)
                if not all(left.get(r, 0) >= a for r, a in pod.requests.items()):
                    continue
            self.add(pod.uid, name, pod.demand, pod.requests)
            return name
        return None

    def free_for(self, placements: Sequence[Placement], resource: str) -> int:
        """Free units of `resource` on nodes at least one of `placements` may use."""
        names = {n for p in placements for n in self.eligible(p)}
        return sum(self.free(n).get(resource, 0) for n in names)

    def reserve(self, placements: Sequence[Placement]) -> tuple[str, ...]:
        """Hold every node these placements may use: later gangs must fit elsewhere."""
        names = sorted({n for p in placements for n in self.eligible(p)})
        for name in names:
            self._reserved.add(name)
            self.capacity.delete_node(name)
        return tuple(names)
