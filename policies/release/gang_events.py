"""The Event a pass asks for, and where an Event about a gang goes.

An `Event` is a decision (which reason, which words, about whom); posting it is the
controller executor's. `event_targets` is the one rule for whom a gang's Events
regard: its owner, then its first members (a bounded number: a 1,000-pod gang must
not cost 1,000 Events per decision).

Pure: plain values in, frozen values out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..catalogue import Metric
from ..cluster.observed_gangs import Owner, PodInfo

#: An Event's object: apiVersion, kind, name, uid, namespace.
Target = Mapping[str, str]
#: A counter a decision adds to: (family, labels, amount).
Counted = tuple[Metric, tuple[tuple[str, str], ...], float]

#: Events about a gang go to its owner and at most this many member pods.
EVENT_POD_LIMIT = 100


@dataclass(frozen=True)
class Event:
    """One Event, posted on each of `regarding`, of the type the catalogue gives `reason`."""

    regarding: tuple[Target, ...]
    reason: str
    note: str


def event_targets(
    namespace: str, owner: Owner | None, members: Sequence[PodInfo],
    limit: int = EVENT_POD_LIMIT,
) -> tuple[Target, ...]:
    """Where an Event about a gang goes: its owner, then its first `limit` members."""
    targets: list[Target] = []
    if owner is not None:
        targets.append({"apiVersion": owner.api_version, "kind": owner.kind,
                        "name": owner.name, "uid": owner.uid, "namespace": namespace})
    for member in members[:limit]:
        targets.append({"apiVersion": "v1", "kind": "Pod", "name": member.name,
                        "uid": member.uid, "namespace": member.namespace})
    return tuple(targets)


def members_event(namespace: str, members: Sequence[PodInfo], reason: str, note: str) -> Event:
    """An Event on the owner of `members` (the first that names one) and the first
    `EVENT_POD_LIMIT` of them."""
    owner = next((m.owner for m in members if m.owner is not None), None)
    return Event(event_targets(namespace, owner, members), reason, note)
