"""Which placements may use which node shapes: answered once per (view, placement, shape).

`Capacity` asks for every bin it builds, so the answers are cached: a shape's answer
holds until the shape is forgotten (its last node gone), and the whole table is dropped
at `CACHE_LIMIT` placements, so endless placements (each pod pinned to its own node)
cannot grow memory. Placements that read per-node identity labels are answered node by
node (`node_answer`) and not cached.

Pure: no I/O. Not locked by itself: `Capacity` calls it under its own lock.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..eligibility import node_eligible
from ..model import Placement
from .node_shapes import NodeShape

#: Answers kept (per view and placement) before a cache is dropped and refilled.
CACHE_LIMIT = 20_000


class ShapeEligibility:
    """The cached eligibility of placements per shape id, for both views."""

    def __init__(self, limit: int = CACHE_LIMIT) -> None:
        self._limit = limit
        self._answers: dict[tuple[str, Placement], dict[int, bool]] = {}

    def answers(self, view: str, placement: Placement) -> dict[int, bool]:
        """The answers of `placement` on `view` so far, by shape id (filled by `of_shape`)."""
        answers = self._answers.get((view, placement))
        if answers is None:
            if len(self._answers) >= self._limit:
                self._answers.clear()
            answers = self._answers[(view, placement)] = {}
        return answers

    @staticmethod
    def of_shape(
        view: str, placement: Placement, answers: dict[int, bool], shape_id: int, shape: NodeShape
    ) -> bool:
        """May `placement` use nodes of this shape on `view`; remembered in `answers`."""
        answer = answers.get(shape_id)
        if answer is None:
            answer = answers[shape_id] = node_eligible(
                placement, node_name="", labels=shape.label_map, taints=shape.taints_in(view)
            )
        return answer

    def forget(self, shape_id: int) -> None:
        """A shape id is gone (and may be reused): drop its answers."""
        for answers in self._answers.values():
            answers.pop(shape_id, None)


def node_answer(
    view: str,
    placement: Placement,
    shape: NodeShape,
    name: str,
    identity: tuple[tuple[str, str], ...],
) -> bool:
    """May `placement` use the node `name` (of `shape`, with its identity labels)."""
    labels: Mapping[str, str] = shape.label_map
    if identity:
        labels = {**labels, **dict(identity)}
    return node_eligible(placement, node_name=name, labels=labels, taints=shape.taints_in(view))
