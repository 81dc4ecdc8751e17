"""What the watchdog does about released gangs this pass: which requeues to carry out
(delete members, suspend an owner), which Events to post, which gauges to show.

The plan finds the gangs to bring back (`recovery`: `Plan.requeues`) and those bound
but never Ready (`watchdog.never_ready`); what is done about them also depends on
what the controller remembers (`WatchdogMemory`): requeues done per owner (bounded by
`rebindRetries`), members already told they are stuck (one `GangMemberStuck` per
member however the stuck set changes pass to pass), gang instances already told they
are not Ready. `watchdog_actions` decides the pass from the plan, that memory and
the owners gangkeeper holds suspended (which to resume now: `to_resume`; the others'
requeue is under way); `after_suspend` decides what follows a suspension from its
outcome (the owner's requeue count is read from the owner, so every leader sees the
same count).

A suspended owner's count is an annotation on it; the others' are this memory (a new
leader starts again at zero: at most one more round per gang per leader change),
bounded by `MAX_TRACKED` owners.

Pure: the plan, the time and plain values in, frozen values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from .. import catalogue as cat
from ..catalogue import Metric
from ..cluster.observed_gangs import PodInfo
from ..settings.config import Config
from .gang_events import Counted, Event, members_event
from .recovery import Requeue, owner_kind
from .results import Plan
from .watchdog import never_ready, partly_bound, partly_bound_for

#: Owners whose requeue counts are remembered (least recently requeued forgotten first).
MAX_TRACKED = 10_000
#: A suspended owner is resumed this long after its suspension even if some of its
#: pods are still there (a controller that is down must not keep it suspended).
RESUME_AFTER_SECONDS = 120.0

#: (namespace, owner uid or gang label): whose requeues are counted together.
RetryKey = tuple[str, str]


@dataclass(frozen=True)
class WatchdogMemory:
    """What the watchdog remembers between passes (a new leader process: nothing)."""

    #: Requeues done per owner, least recently requeued first.
    retries: Mapping[RetryKey, int] = field(default_factory=dict)
    #: (gang namespace, gang name, member uid) already told they are stuck.
    reported: frozenset[tuple[str, str, str]] = frozenset()
    #: Gang instances (namespace, name, arrival) already told they are not Ready.
    not_ready: frozenset[tuple[str, str, float]] = frozenset()


@dataclass(frozen=True)
class WatchdogActions:
    events: tuple[Event, ...] = ()
    counts: tuple[Counted, ...] = ()
    #: Members to delete (a uid precondition) for their owner to recreate.
    deletes: tuple[PodInfo, ...] = ()
    #: Requeues by suspending the gang's owner; what follows is `after_suspend`'s.
    suspends: tuple[Requeue, ...] = ()
    #: uids of the owners suspended by gangkeeper to resume now (`to_resume`).
    resume: frozenset[str] = frozenset()
    gauges: Mapping[Metric, float] = field(default_factory=dict)
    memory: WatchdogMemory = WatchdogMemory()


def to_resume(
    suspended: Iterable[tuple[str, float]], pods: Iterable[PodInfo], now: float
) -> frozenset[str]:
    """Which owners suspended by gangkeeper ((uid, suspended since) in) to resume now:
    those none of whose pods is left, or suspended `RESUME_AFTER_SECONDS` ago."""
    held = list(suspended)
    if not held:
        return frozenset()
    left = {p.owner.uid for p in pods if p.owner is not None}
    return frozenset(uid for uid, since in held
                     if uid not in left or now - since >= RESUME_AFTER_SECONDS)


def retry_key(requeue: Requeue) -> RetryKey:
    owner = requeue.gang.owner
    return (requeue.gang.namespace, owner.uid if owner is not None else requeue.gang.label)


def _remembered(retries: Mapping[RetryKey, int], key: RetryKey, number: int) -> dict[
        RetryKey, int]:
    after = {k: v for k, v in retries.items() if k != key}
    after[key] = number  # the most recent last
    while len(after) > MAX_TRACKED:
        del after[next(iter(after))]
    return after


def watchdog_actions(
    result: Plan,
    now: float,
    config: Config,
    memory: WatchdogMemory,
    *,
    pods: Iterable[PodInfo] = (),
    suspended: Iterable[tuple[str, float]] = (),
) -> WatchdogActions:
    """This pass's watchdog actions. `pods`: every live pod the controller keeps
    (deleting ones too); `suspended`: (uid, since) of the owners gangkeeper holds
    suspended. An owner resumed in this pass may still show its old pods, and one
    still suspended is being requeued: neither is requeued again yet."""
    held = list(suspended)
    resumed = to_resume(held, pods, now)
    busy = {uid for uid, _ in held} - resumed
    live = {g.key for g in result.gangs}
    reported = {k for k in memory.reported if k[:2] in live}
    not_ready = {k for k in memory.not_ready if k[:2] in live}
    retries: Mapping[RetryKey, int] = memory.retries
    partial = [g for g in result.gangs if partly_bound(g)]
    gauges = {
        cat.GANGS_PARTLY_BOUND: float(len(partial)),
        cat.GANG_PARTLY_BOUND_SECONDS: max((partly_bound_for(g, now) for g in partial),
                                           default=0.0),
        cat.GANGS_NOT_READY: 0.0,
    }
    events: list[Event] = []
    counts: list[Counted] = []
    deletes: list[PodInfo] = []
    suspends: list[Requeue] = []
    for gang in result.gangs:
        if never_ready(gang, now, config):
            gauges[cat.GANGS_NOT_READY] += 1
            instance = (*gang.key, gang.arrived)
            if instance not in not_ready:
                not_ready.add(instance)
                events.append(members_event(gang.namespace, gang.members, cat.GANG_NOT_READY, (
                    f"gang {gang.namespace}/{gang.name}: all {gang.present} members bound "
                    f"but not all Ready {config.pods_ready_timeout_seconds}s after "
                    "release (image pull, crash loop?)"
                )))
    for requeue in result.requeues:
        owner = requeue.gang.owner
        if owner is not None and owner.uid in resumed:
            continue
        if requeue.how == "report":
            events.extend(_stuck(requeue, "its pods are not recreated by an owner", reported))
            continue
        if owner is not None and owner.uid in busy:
            continue
        key = retry_key(requeue)
        done = retries.get(key, 0)
        if done >= config.rebind_retries:
            events.extend(_stuck(requeue, "retries spent", reported))
            continue
        if requeue.how == "suspend":
            suspends.append(requeue)
            continue
        deletes.extend(requeue.delete)
        retries = _remembered(retries, key, done + 1)
        counts.extend(_requeued(requeue))
        events.append(announce(requeue, done + 1, config))
    return WatchdogActions(
        events=tuple(events), counts=tuple(counts), deletes=tuple(deletes),
        suspends=tuple(suspends), resume=resumed, gauges=gauges,
        memory=WatchdogMemory(retries, frozenset(reported), frozenset(not_ready)),
    )


def after_suspend(
    memory: WatchdogMemory, requeue: Requeue, outcome: str, number: int, config: Config
) -> tuple[list[Event], list[Counted], WatchdogMemory]:
    """What follows the suspension of `requeue`'s owner: `outcome` and `number` as the
    executor's suspension answered (`suspended` with the requeue's number; `spent`
    with the count found on the owner; anything else: nothing, the next pass decides
    again)."""
    if outcome == "spent":
        reported = set(memory.reported)
        events = _stuck(requeue, "retries spent", reported)
        retries = _remembered(memory.retries, retry_key(requeue), number)
        return events, [], replace(memory, retries=retries, reported=frozenset(reported))
    if outcome != "suspended":
        return [], [], memory
    retries = _remembered(memory.retries, retry_key(requeue), number)
    return ([announce(requeue, number, config)], _requeued(requeue),
            replace(memory, retries=retries))


def _requeued(requeue: Requeue) -> list[Counted]:
    counts: list[Counted] = [
        (cat.GANG_REQUEUES, (("cause", requeue.cause), ("how", requeue.how)), 1.0)]
    if requeue.cause == "rebind":
        counts.append((cat.GANG_REBINDS, (), 1.0))
    return counts


def announce(requeue: Requeue, number: int, config: Config) -> Event:
    """The Event saying a gang was requeued (retry `number`), and how."""
    gang = requeue.gang
    who = f"gang {gang.namespace}/{gang.name}"
    if requeue.cause == "rebind" and any(m.gated for m in requeue.about):
        what = (f"{len(requeue.about)} replacement members had no room beside the "
                f"members bound for {int(requeue.waited)}s")
    elif requeue.cause == "rebind":
        what = (f"{len(requeue.about)} members pinned but unbound for "
                f"{int(requeue.waited)}s")
    else:
        what = (f"{len(requeue.about)} members bound but not Ready "
                f"{int(requeue.waited)}s after release (podsReadyRequeue)")
    if requeue.how == "suspend":
        owner = gang.owner
        name = owner.name if owner is not None else "?"
        kind = owner_kind(gang)
        done = (f"{kind} {name} suspended, to be resumed once its pods are gone: the Job "
                "controller deletes them without counting failures, and the gang is "
                "placed anew")
    elif requeue.whole:
        done = (f"all {len(requeue.delete)} members deleted for their owner to recreate "
                f"({requeue.why_whole})")
    else:
        done = "they were deleted for their owner to recreate"
    reason = (cat.GANG_MEMBERS_RECREATED if requeue.how == "delete" and not requeue.whole
              else cat.GANG_REQUEUED)
    return members_event(gang.namespace, requeue.about, reason, (
        f"{who}: {what}; {done} (retry {number} of {config.rebind_retries})"
    ))


def _stuck(requeue: Requeue, why: str, reported: set[tuple[str, str, str]]) -> list[Event]:
    """A `GangMemberStuck` Event on the stuck members not told yet (added to
    `reported`); none for a gang not Ready (its `GangNotReady` Event said it)."""
    gang = requeue.gang
    if requeue.cause != "rebind":
        return []
    fresh = [m for m in requeue.about if (*gang.key, m.uid) not in reported]
    if not fresh:
        return []
    reported.update((*gang.key, m.uid) for m in fresh)
    names = ", ".join(sorted(m.name for m in requeue.about))
    hint = (
        f"suspend and resume the {owner_kind(gang)} to place the "
        "gang anew" if requeue.how == "suspend"
        else "delete them to place the gang anew"
    )
    return [members_event(gang.namespace, fresh, cat.GANG_MEMBER_STUCK, (
        f"gang {gang.namespace}/{gang.name}: {names} pinned but unbound "
        f"for {int(requeue.waited)}s; not requeued ({why}): {hint}"
    ))]
