"""What happened to released gangs: members pinned but never bound, gangs partly
bound, gangs bound but never Ready.

A pin is a promise made at release; a pod gangkeeper does not control can still take
the pinned node's room before the member binds (or the node goes away), and the
member then waits for ever while its gang-mates hold GPUs. `stuck(gang, now, config)`
finds members released pinned (`gangkeeper.io/released-at`, written in the patch
that lifted the gate) more than `rebindSeconds` ago, still unbound, and that the
scheduler has tried and found no node for (PodScheduled False, Unschedulable). A
member the scheduler has not come to yet is not stuck: after a burst of releases
kube-scheduler binds at its client's rate (50 a second by default), so 8,000
members take minutes, and deleting the ones at the back of its queue only makes it
longer (`bench.load` at 1,000 nodes: a gang's last member to its gates lifted p99
140 s, against 21 s for the same binds without gangkeeper). A member with no
verdict after `UNTRIED_FACTOR` times `rebindSeconds` counts as stuck all the same:
a scheduler that never says may never bind it. If the gang's
owner recreates deleted pods (Job, and through it JobSet and Trainer;
LeaderWorkerSet; the training-operator kinds), the controller deletes them so the
owner recreates them, the webhook gates them again and the plan places them anew, at
most `rebindRetries` times per gang; for a bare pod it only reports (Event, status).

`partly_bound(gang)` and `never_ready(gang, now, config)` feed the metrics and Events
that say how long a gang held GPUs it could not use.

Pure: `GangObservation`s and the time in, frozen values out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..assigner.pin import pin_of
from ..cluster.observed_gangs import GangObservation, PodInfo
from ..recognizers.capabilities import recreating_kinds
from ..recognizers.registry import default_registry
from ..settings.config import Config

#: Top-level owners whose controllers recreate a deleted member pod (each recogniser
#: says how its kind is requeued: `recognizers.base.RequeuesGangs`).
RECREATING_OWNERS = recreating_kinds(default_registry())


def recreates(gang: GangObservation) -> bool:
    """The gang's owner recreates deleted members: deleting them brings the gang back."""
    return gang.owner is not None and gang.owner.kind in RECREATING_OWNERS


@dataclass(frozen=True)
class Stuck:
    """Members of a released gang pinned and still unbound after `rebindSeconds`."""

    gang: GangObservation
    members: tuple[PodInfo, ...]
    #: The owner recreates deleted members: deleting them brings the gang back.
    recreate: bool
    #: Seconds the longest-waiting of them has waited since its release.
    waited: float


#: An unbound pinned member with no verdict of the scheduler is stuck after this many
#: times `rebindSeconds`.
UNTRIED_FACTOR = 10


def _pinned(member: PodInfo) -> bool:
    return pin_of(member.placement) is not None


def _due(member: PodInfo, config: Config) -> float:
    """When a released, unbound, pinned member counts as stuck (`math.inf`: it is not
    one)."""
    if member.gates or member.node_name or not member.released_at or not _pinned(member):
        return math.inf
    wait = config.rebind_seconds * (1 if member.unschedulable else UNTRIED_FACTOR)
    return member.released_at + wait


def stuck(gang: GangObservation, now: float, config: Config) -> Stuck | None:
    """The gang's stuck members, or None when none is."""
    # A member another system still gates is held by it, not stuck (`_due`).
    members = tuple(m for m in gang.members if now >= _due(m, config))
    if not members:
        return None
    return Stuck(gang, members, recreates(gang), max(now - m.released_at for m in members))


def next_deadline(gang: GangObservation, config: Config) -> float:
    """When `stuck` — or `never_ready`, with `podsReadyRequeue` — first says yes of this
    released gang as it is now (`math.inf`: never, while it stays as it is). A plan of
    an unchanged cluster is decided the same until then (`release.planner`)."""
    due = [_due(m, config) for m in gang.members]
    if (
        config.pods_ready_requeue and not gang.gated and gang.bound >= gang.present
        and not all(m.ready for m in gang.members)
    ):
        times = [m.released_at for m in gang.members if m.released_at]
        if times:
            due.append(max(times) + config.pods_ready_timeout_seconds)
    return min(due, default=math.inf)


def replacement_stuck(
    gang: GangObservation, members: Sequence[PodInfo], waited: float
) -> Stuck:
    """Replacement members of a released gang (still gated: no room beside the members
    bound) that waited `waited` seconds since they were created."""
    return Stuck(gang, tuple(members), recreates(gang), waited)


def partly_bound(gang: GangObservation) -> bool:
    """Every gate lifted, some members bound and some not: GPUs held to no use."""
    return not gang.gated and 0 < gang.bound < gang.present


def partly_bound_for(gang: GangObservation, now: float) -> float:
    """Seconds since the earliest release of a partly bound gang (0 when unknown)."""
    times = [m.released_at for m in gang.members if m.released_at]
    return max(0.0, now - min(times)) if times and partly_bound(gang) else 0.0


def never_ready(gang: GangObservation, now: float, config: Config) -> bool:
    """All members bound, not all Ready, `podsReadyTimeoutSeconds` after release."""
    if gang.gated or gang.bound < gang.present or all(m.ready for m in gang.members):
        return False
    times = [m.released_at for m in gang.members if m.released_at]
    return bool(times) and now - max(times) >= config.pods_ready_timeout_seconds
