"""What the controller says and remembers about a preemption the plan chose
(`preemption`: `Plan.preemptions`), before and after its victims are taken.

Before: a `GangPreempting` Event on the preemptor (whom, why). After, from each victim
unit's outcome as the executor's write answered (`started`, `refused` by a
PodDisruptionBudget through the Eviction API, `failed`): the counters
`gangkeeper_preemptions_total{outcome}` and `gangkeeper_preempted_gpus_total`, a
`PreemptedByGang` Event on each victim taken, a `GangPreemptionBlocked` Event on the
preemptor when some were refused, and the victims' pods to remember as leaving.

Victims acted on are remembered (`Leaving`: pod uid → when) until their pods are gone
or `LEAVING_SECONDS` pass, and handed to the next passes (`leaving_now`), which count
them as gone for the preemptor and never choose them again: the room they leave is
held for it by the holding rule. Memory: one entry per victim pod, forgotten with the
pod.

Pure: the plan's `Preemption`s, outcomes, `PodInfo`s and the time in, values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .. import catalogue as cat
from ..cluster.observed_gangs import PodInfo
from .gang_events import Counted, Event, members_event
from .preemption import Preemption

#: A victim not gone after this long is forgotten: the plan may choose it again.
LEAVING_SECONDS = 300.0

#: Victim pod uid → when it was acted on (epoch seconds).
Leaving = Mapping[str, float]

_HOW = {"suspend": "requeued whole (its owner suspended, resumed once its pods are gone)",
        "delete": "requeued whole (its pods deleted for their owner to recreate)",
        "evict": "evicted"}


def leaving_now(leaving: Leaving, pods: Iterable[PodInfo], now: float) -> dict[str, float]:
    """The victims still to go: those whose pods are live and not stale."""
    if not leaving:
        return {}
    live = {p.uid for p in pods}
    return {uid: since for uid, since in leaving.items()
            if uid in live and now - since < LEAVING_SECONDS}


def _who(found: Preemption) -> str:
    gang = found.preemptor
    return f"gang {gang.namespace}/{gang.name} (priority {gang.priority})"


def preempting_event(found: Preemption) -> Event:
    """Said on the preemptor before its victims are taken."""
    gang = found.preemptor
    return members_event(gang.namespace, gang.members, cat.GANG_PREEMPTING, (
        f"{_who(found)} does not fit; preempting {found.summary()}"
    ))


def after_victims(
    found: Preemption, outcomes: Sequence[str], now: float
) -> tuple[list[Event], list[Counted], dict[str, float]]:
    """The Events, counters and leaving victims (uid → `now`) once each of
    `found.victims` was taken with the outcome at the same place in `outcomes`."""
    events: list[Event] = []
    counts: list[Counted] = []
    leaving: dict[str, float] = {}
    refused: list[str] = []
    for unit, outcome in zip(found.victims, outcomes, strict=True):
        counts.append((cat.PREEMPTIONS, (("outcome", outcome),), 1.0))
        if outcome == "refused":
            refused.append(unit.title)
        if outcome != "started":
            continue
        counts.append((cat.PREEMPTED_GPUS, (), float(unit.gpus)))
        leaving.update((p.uid, now) for p in unit.pods)
        events.append(members_event(unit.pods[0].namespace, unit.pods, cat.PREEMPTED_BY_GANG, (
            f"{unit.title} (priority {unit.priority}) {_HOW[unit.how]}: preempted by "
            f"{_who(found)}"
        )))
    if refused:
        gang = found.preemptor
        events.append(members_event(gang.namespace, gang.members, cat.GANG_PREEMPTION_BLOCKED, (
            f"{_who(found)}: the Eviction API refused {', '.join(refused)} (a "
            "PodDisruptionBudget); victims are chosen again"
        )))
    return events, counts, leaving
