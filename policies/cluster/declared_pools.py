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

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ..model import DEVICE_RESOURCE_PREFIX
from ..settings.config import Config
from .node_resources import OtherResources, OtherVector, pool_vector
from .node_shapes import NodeShape

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
        """Whether a live node of these labels and GPUs is one of this pool's nodes.

        A pool of DRA devices (`dra:<class>` among its GPUs) is compared on the names
        it declares only: the live path also gives a DRA Node the class's
        `extendedResourceName` where the Node lists none (`policies.dra.extended`),
        the same devices under a second name the pool need not declare."""
        matching = all(labels.get(k) == v for k, v in self.labels.items())
        if any(name.startswith(DEVICE_RESOURCE_PREFIX) for name, _ in self.gpus):
            declared = {name for name, _ in self.gpus}
            gpus = tuple((name, n) for name, n in gpus if name in declared)
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


def declare_pools(
    config: Config,
    intern: Callable[[NodeShape], int],
    gpus_of: Callable[[Mapping[str, int]], GpuVector],
    other: OtherResources,
) -> tuple[list[DeclaredPool], list[OtherVector], list[int]]:
    """The config's pools as a new `Capacity` holds them: each pool's shape interned
    (`intern`) and its other resources counted at maxCount in `other`. Returns the GPU
    pools, their other-resource vectors, and the shape ids of pools without GPUs."""
    pools: list[DeclaredPool] = []
    vectors: list[OtherVector] = []
    plain: list[int] = []
    for pool in config.pools:
        shape = NodeShape(
            gpus=gpus_of(pool.allocatable),
            labels=tuple(sorted(pool.labels.items())),
            taints=tuple(pool.taints),
        )
        sid = intern(shape)
        if shape.gpus:
            pools.append(DeclaredPool(sid, pool.max_count, pool.labels, shape.gpus, pool.max_count))
            vectors.append(pool_vector(pool, config))
            other.add_pool(sid, vectors[-1], pool.max_count)
        else:
            # A pool without GPUs is room for members without GPUs only. Its live
            # nodes are not charged to it: counting them twice can only admit more.
            plain.append(sid)
            other.add_pool(sid, pool_vector(pool, config), pool.max_count)
    return pools, vectors, plain
