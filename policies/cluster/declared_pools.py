"""Declared pools (`Config.pools`) as the "ever" view of `Capacity` counts them.

A pool's `maxCount` is the most nodes the pool can ever have, as a node group's maximum
size is for cluster-autoscaler and a NodePool's limit for Karpenter: the nodes it
already has are part of it. So a live node that carries every label of the pool and
offers the pool's GPUs is one of the pool's nodes, and the pool adds only its headroom,
`maxCount` minus those nodes, on top of the live view. (Counting them twice admitted
gangs beyond the pool's real limit once the autoscaler had made nodes; such a gang then
waited for nodes that could never come.) A pool declared without labels, or with labels
its nodes do not carry, owns no live node and counts at its full maxCount: that can
only admit more, never reject.

Pure: shapes and counts in, counts out; `Capacity` holds the lock and does the
bookkeeping of its other-resource vectors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

GpuVector = tuple[tuple[str, int], ...]


@dataclass
class DeclaredPool:
    """One declared pool: its shape id in the capacity, its maximum, its headroom now."""

    shape_id: int
    max_count: int
    labels: Mapping[str, str]
    gpus: GpuVector
    #: maxCount minus the live nodes recognised as the pool's (never below zero).
    headroom: int

    def owns(self, labels: Mapping[str, str], gpus: GpuVector) -> bool:
        """Whether a live node of these labels and GPUs is one of this pool's nodes."""
        matching = all(labels.get(k) == v for k, v in self.labels.items())
        return bool(self.labels) and gpus == self.gpus and matching


def headrooms(
    pools: Iterable[DeclaredPool],
    live: Iterable[tuple[Mapping[str, str], GpuVector, int]],
) -> list[int]:
    """Each pool's headroom given the live shapes (labels, GPUs, node count).

    A live node is charged to the first pool that owns it, so two pools declared with
    overlapping labels do not both shrink for the same node.
    """
    pools = list(pools)
    left = [pool.max_count for pool in pools]
    for labels, gpus, count in live:
        for i, pool in enumerate(pools):
            if pool.owns(labels, gpus):
                left[i] -= count
                break
    return [max(0, n) for n in left]
