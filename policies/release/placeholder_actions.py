"""What is done about placeholder pods this pass besides creating and deleting the
ones the plan asks for: the asks that timed out (an Event, and the gang's backoff the
next passes give `plan()`), and placeholders that disappeared without the controller
deleting them (preempted or removed by someone else: an Event; the next pass asks
again for the member they held room for).

Both need what the controller remembers (`PlaceholderMemory`): the gangs' backoff,
the placeholders seen at the last pass; and one record of its own writes, the uids it
deleted (so their disappearance is no preemption), passed in as a plain value.
`placeholder_actions(plan, pods, memory, deleted)` returns the writes, Events,
counters and the memory after the pass. The backoff lives in one process only: a new
leader asks again at once, which costs one more ask, never a leak.

Pure: the plan, `PodInfo`s and plain values in, frozen values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .. import catalogue as cat
from ..autoscaling.asking import Ask, Backoff, gang_key
from ..cluster.observed_gangs import GangObservation, PodInfo
from .gang_events import Counted, Event, event_targets
from .results import Plan

#: Events about a gang's placeholders go to its owner and at most this many members.
EVENT_POD_LIMIT = 20


def gang_targets(gang: GangObservation) -> tuple[Mapping[str, str], ...]:
    """Where an Event about a gang's asked-for capacity goes: owner, first members."""
    return event_targets(gang.namespace, gang.owner, gang.members, EVENT_POD_LIMIT)


@dataclass(frozen=True)
class PlaceholderMemory:
    """What the placeholder decisions remember between passes."""

    #: Gang instance (namespace, label, arrival) → (asks timed out, epoch of the next ask).
    backoff: Backoff = field(default_factory=dict)
    #: uid → (namespace, gang label, name) of the placeholders seen at the last pass.
    seen: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class PlaceholderActions:
    deletes: tuple[PodInfo, ...] = ()
    #: (the ask, the member whose spec the placeholder copies).
    creates: tuple[tuple[Ask, PodInfo], ...] = ()
    events: tuple[Event, ...] = ()
    counts: tuple[Counted, ...] = ()
    memory: PlaceholderMemory = PlaceholderMemory()
    #: The uids deleted by the controller still to remember (those still present).
    deleted: frozenset[str] = frozenset()


def placeholder_actions(
    result: Plan, pods: Iterable[PodInfo], memory: PlaceholderMemory, deleted: frozenset[str]
) -> PlaceholderActions:
    """This pass's placeholder actions; `pods`: the live pods the controller keeps;
    `deleted`: uids of the placeholders the controller deleted."""
    events: list[Event] = []
    counts: list[Counted] = []
    seen, kept = _preempted(pods, _gangs_by_key(result), memory.seen, deleted,
                            events=events, counts=counts)
    backoff = dict(memory.backoff)
    deletes: list[PodInfo] = list(result.orphans)
    creates: list[tuple[Ask, PodInfo]] = []
    for ask in result.asks:
        deletes.extend(ask.delete)
        creates.extend((ask, member) for member in ask.create)
        if ask.timed_out:
            backoff[gang_key(ask.gang)] = (ask.attempts, ask.retry_at)
            counts.append((cat.PROVISIONING_TIMEOUTS, (), 1.0))
            events.append(Event(gang_targets(ask.gang), cat.GANG_PROVISIONING_TIMED_OUT,
                                f"gang {ask.gang.namespace}/{ask.gang.name}: {ask.timed_out}"))
    present = {(r.namespace, r.label, r.arrived) for r in result.reports}
    return PlaceholderActions(
        deletes=tuple(deletes), creates=tuple(creates), events=tuple(events),
        counts=tuple(counts),
        memory=PlaceholderMemory({k: v for k, v in backoff.items() if k in present}, seen),
        deleted=kept,
    )


def _preempted(
    pods: Iterable[PodInfo], gangs: Mapping[tuple[str, str], GangObservation],
    before: Mapping[str, tuple[str, str, str]], deleted: frozenset[str], *,
    events: list[Event], counts: list[Counted],
) -> tuple[dict[str, tuple[str, str, str]], frozenset[str]]:
    """Placeholders seen at the last pass and gone (or terminating) now that the
    controller did not delete: counted, and an Event on their gang; the placeholders
    seen now and the deleted uids still present."""
    now: dict[str, tuple[str, str, str]] = {}
    terminating: set[str] = set()
    for pod in pods:
        if pod.placeholder_for:
            now[pod.uid] = (pod.namespace, pod.placeholder_for, pod.name)
            if pod.deleting:
                terminating.add(pod.uid)
    for uid, (namespace, label, name) in before.items():
        if (uid in now and uid not in terminating) or uid in deleted:
            continue
        counts.append((cat.PLACEHOLDERS_PREEMPTED, (), 1.0))
        gang = gangs.get((namespace, label))
        if gang is not None:
            events.append(Event(gang_targets(gang), cat.GANG_PLACEHOLDER_PREEMPTED, (
                f"placeholder {name} of gang {namespace}/{gang.name} was preempted or "
                "deleted by someone else; asking the autoscaler again"
            )))
    seen = {uid: v for uid, v in now.items() if uid not in terminating}
    return seen, deleted & frozenset(now)


def _gangs_by_key(result: Plan) -> dict[tuple[str, str], GangObservation]:
    """The gangs of a plan's asks and releases, by (namespace, label): those whose
    placeholders can have been preempted since the last pass."""
    out: dict[tuple[str, str], GangObservation] = {}
    for ask in result.asks:
        out[ask.gang.key] = ask.gang
    for release in result.releases:
        out[release.gang.key] = release.gang
    return out
