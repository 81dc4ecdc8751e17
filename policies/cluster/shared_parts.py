"""One shared instance per equal immutable part of many pods' facts (`PodInfo`).

A cluster's worth of pods has only a few distinct GPU demands, placements and
later-members annotations; sharing them keeps the controller's memory per pod small.
Bounded (`memo.BoundedMemo`), owned by whoever keeps many `PodInfo`s (the controller).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..memo import BoundedMemo
from ..model import Placement
from .later_members import LaterMembers, parse_later


class SharedParts:
    """One instance per equal value of a pod's immutable parts: most pods have the same
    few GPU demands, placements and later-members lists. At most `size` distinct values
    of each are kept (least recently used dropped first), so churning placements cannot
    grow memory.
    Owned by whoever keeps many `PodInfo`s (the controller)."""

    def __init__(self, size: int = 4096) -> None:
        self._demands: BoundedMemo[tuple[tuple[str, int], ...], Mapping[str, int]]
        self._demands = BoundedMemo(size)
        self._placements: BoundedMemo[Placement, Placement] = BoundedMemo(size)
        self._later: BoundedMemo[str, tuple[LaterMembers, ...] | str] = BoundedMemo(size)

    def demand(self, demand: Mapping[str, int]) -> Mapping[str, int]:
        key = tuple(sorted(demand.items()))
        return self._demands.share(key, MappingProxyType(dict(key)))

    def placement(self, placement: Placement) -> Placement:
        return self._placements.share(placement, placement)

    def later(self, raw: str) -> tuple[LaterMembers, ...] | str:
        """The parsed later-members annotation: every member of a gang carries the same."""
        found = self._later.get(raw)
        return found if found is not None else self._later.share(raw, parse_later(raw))
