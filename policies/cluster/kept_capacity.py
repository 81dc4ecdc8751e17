"""The node side of `Capacity`, kept from one planning pass to the next.

Building a `Capacity` reads every node into its shape; a planning pass needs two of
them (the fleet's, which the pass then fills with pods, and the empty cluster the
holding rule and preemption ask "could it ever fit?"), and at 1,000 nodes building
both took about a quarter of an in-flight pass. `KeptCapacity` holds both and moves
only the nodes whose facts changed (`update`, with the facts of this pass); a pass
starts its fleet from `fleet_copy()` and asks `every` as it is, never changing it.

Pure: `NodeFacts` in, no I/O. Owned by one planner; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..settings.config import Config
from .capacity import Capacity
from .node_facts import NodeFacts


class KeptCapacity:
    """GPU nodes only (`fleet_copy`, a fresh pass's fleet) and every node (`every`, the
    empty cluster), both of exactly the facts last given to `update`."""

    def __init__(self, config: Config) -> None:
        self._gpu = Capacity(config)
        #: Read-only for a pass: the nodes at their allocatable, no pod counted.
        self.every = Capacity(config)
        self._facts: dict[str, NodeFacts] = {}

    def update(self, facts: Iterable[NodeFacts]) -> None:
        """Make both capacities hold exactly these nodes (the last facts of a name win,
        as in `Fleet`); a node whose facts are the same object as before is not moved."""
        seen: dict[str, NodeFacts] = {}
        for node in facts:
            seen[node.name] = node
        for name, node in seen.items():
            if self._facts.get(name) is node:
                continue
            self.every.upsert_facts(node)
            if node.gpus:
                self._gpu.upsert_facts(node)
            else:
                # `fits_now` counts GPUs: a node without them is nothing to the fleet.
                self._gpu.delete_node(name)
        for name in self._facts.keys() - seen.keys():
            self.every.delete_node(name)
            self._gpu.delete_node(name)
        self._facts = seen

    def fleet_copy(self) -> Capacity:
        """The GPU nodes' capacity with no pod counted, for one pass to fill."""
        return self._gpu.copy()
