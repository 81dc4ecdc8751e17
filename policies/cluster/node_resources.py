"""The resources of GPU nodes other than GPUs (cpu, memory, ephemeral-storage, ...),
per capacity shape, for admission's cpu/memory checks (`resource_fit`).

Node shapes are keyed by GPUs, labels and taints only: real nodes of one type differ
by a few bytes of allocatable memory, and keying shapes by it would undo the
compression. So `OtherResources` keeps, per shape id, how many nodes report each
vector of other allocatable (usually one vector per shape), and declared pools their
template's vector at maxCount. Amounts are in placement's units
(`podspec.resource_amount`: millicores, bytes).

Pure bookkeeping; the lock is the capacity's.
"""

from __future__ import annotations

import math
from collections import Counter

from ..podspec import PODS_RESOURCE
from ..settings.config import Config, NodePool
from .node_facts import NodeFacts

#: (resource, amount) pairs, sorted: the non-GPU allocatable of one node.
OtherVector = tuple[tuple[str, int], ...]


def other_vector(facts: NodeFacts) -> OtherVector:
    """A node's non-GPU allocatable (the pod count left out: it is never what a gang
    lacks on an empty cluster)."""
    skip = {*facts.gpus, PODS_RESOURCE}
    return tuple(sorted((r, a) for r, a in facts.allocatable.items() if r not in skip))


def pool_vector(pool: NodePool, config: Config) -> OtherVector:
    """A pool template's non-GPU allocatable; config gives cpu in cores."""
    return tuple(
        sorted(
            (r, a * 1000 if r == "cpu" else a)
            for r, a in pool.allocatable.items()
            if not config.is_gpu_resource(r) and r != PODS_RESOURCE
        )
    )


class OtherResources:
    """Per shape id: Counter of other-allocatable vectors over its nodes (and pools)."""

    def __init__(self) -> None:
        self._vectors: dict[int, Counter[OtherVector]] = {}

    def add(self, shape_id: int, vector: OtherVector, count: int = 1) -> None:
        """Count `count` more nodes of `vector` (fewer, when negative: a pool's headroom)."""
        counts = self._vectors.setdefault(shape_id, Counter())
        counts[vector] += count
        if counts[vector] <= 0:
            del counts[vector]
        if not counts:
            del self._vectors[shape_id]

    add_pool = add

    def copy(self) -> OtherResources:
        new = OtherResources()
        new._vectors = {sid: Counter(counts) for sid, counts in self._vectors.items()}
        return new

    def remove(self, shape_id: int, vector: OtherVector) -> None:
        counts = self._vectors.get(shape_id)
        if counts is None:
            return
        counts[vector] -= 1
        if counts[vector] <= 0:
            del counts[vector]
        if not counts:
            del self._vectors[shape_id]

    def of(self, shape_ids: list[int]) -> Counter[OtherVector]:
        """The vectors (with node counts) of these shapes together."""
        total: Counter[OtherVector] = Counter()
        for sid in shape_ids:
            total.update(self._vectors.get(sid, {}))
        return total


def unknown(vectors: Counter[OtherVector], resource: str) -> bool:
    """Some node does not report `resource`: nothing can be proven about it."""
    return any(resource not in dict(v) for v in vectors)


def shown(resource: str, amount: int) -> str:
    """An amount as users write it: cores for cpu, Gi (Mi below 1Gi, bytes below 1Mi)
    for memory and storage."""
    if resource == "cpu":
        cores = amount / 1000
        return f"{cores:g} cpu"
    if resource in ("memory", "ephemeral-storage"):
        if amount < 2**20:
            return f"{amount} {resource}"  # bytes, as a manifest writes them
        if amount < 2**30:
            mib = math.ceil(amount / 2**20 * 10) / 10
            return f"{mib:g}Mi {resource}"
        gib = math.ceil(amount / 2**30 * 10) / 10
        return f"{gib:g}Gi {resource}"
    return f"{amount} {resource}"
