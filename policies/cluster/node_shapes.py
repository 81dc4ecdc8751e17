"""Node shapes and bins: the compressed form in which `Capacity` keeps GPU nodes.

A *shape* is what makes nodes interchangeable for gang placement (GPU allocatable,
labels without per-node identity, taints, cordon); a *bin* is a count of nodes offering
some GPUs that some of a gang's roles may use. Pure value types: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..model import Taint
from .node_facts import TRANSIENT_TAINTS, UNSCHEDULABLE_TAINT

GpuVector = tuple[tuple[str, int], ...]


def gpu_vector(amounts: Mapping[str, int], is_gpu: Callable[[str], bool]) -> GpuVector:
    """The GPU resources of `amounts` with a positive amount, sorted: a shape's key part."""
    return tuple(sorted((name, n) for name, n in amounts.items() if n > 0 and is_gpu(name)))


@dataclass(frozen=True)
class NodeShape:
    """What makes nodes interchangeable for gang placement."""

    gpus: GpuVector
    labels: tuple[tuple[str, str], ...]
    taints: tuple[Taint, ...]
    unschedulable: bool = False
    _labels: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_labels", dict(self.labels))

    @property
    def label_map(self) -> Mapping[str, str]:
        return self._labels

    def taints_in(self, view: str) -> tuple[Taint, ...]:
        if view == "ever":
            return tuple(t for t in self.taints if t.key not in TRANSIENT_TAINTS)
        if self.unschedulable:
            return (*self.taints, UNSCHEDULABLE_TAINT)
        return self.taints


@dataclass(frozen=True)
class Bin:
    """`count` nodes that each offer `gpus` and may host the roles in `eligible`."""

    gpus: GpuVector
    count: int
    #: Indexes into the placements the bins were computed for.
    eligible: frozenset[int]
    #: `gpus` as a mapping, built once: feasibility reads it for every member and bin.
    gpu_map: Mapping[str, int] = field(
        default_factory=dict, init=False, compare=False, hash=False, repr=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu_map", dict(self.gpus))

    def amount(self, resource: str) -> int:
        return self.gpu_map.get(resource, 0)
