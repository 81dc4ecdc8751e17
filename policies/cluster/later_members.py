"""The members a gang's controller creates only after the gang is released.

A gang may declare them in the `gangkeeper.io/later-members` annotation (a JSON list of
{count, demand, nodeSelector}); they are never waited for, but their room is held until
they arrive. `parse_later` reads the annotation into `LaterMembers` or says why it cannot.

Pure: a string in, frozen dataclasses out. No I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .. import names
from ..model import Placement


@dataclass(frozen=True)
class LaterMembers:
    """Members of a gang that its controller creates only after the gang is released
    (from the `gangkeeper.io/later-members` annotation): never waited for, but their
    room is held until they arrive."""

    count: int
    demand: Mapping[str, int]
    placement: Placement



def parse_later(raw: str) -> tuple[LaterMembers, ...] | str:
    bad = f"annotation {names.LATER_ANNOTATION} is not a list of {{count, demand}}: {raw[:80]!r}"
    try:
        data = json.loads(raw)
    except ValueError:
        return bad
    if not isinstance(data, list):
        return bad
    found: list[LaterMembers] = []
    for entry in data:
        if not isinstance(entry, dict):
            return bad
        count, demand = entry.get("count"), entry.get("demand", {})
        selector = entry.get("nodeSelector", {})
        if (
            isinstance(count, bool)
            or not isinstance(count, int)
            or count < 0
            or not isinstance(demand, dict)
            or not all(isinstance(k, str) and type(v) is int and v >= 0 for k, v in demand.items())
            or not isinstance(selector, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in selector.items())
        ):
            return bad
        placement = Placement(node_selector=tuple(sorted(selector.items())))
        found.append(LaterMembers(count, MappingProxyType(dict(sorted(demand.items()))), placement))
    return tuple(found)
