"""Every write a pass asks for besides its releases, decided from the plan and the
controller's memory: the Events to post about stuck gangs, the coscheduling
PodGroups to nudge, when to plan again, and the counters those decisions add to
(`Actions`); and `PassActions`, every action of a pass besides its releases in one
value: placeholders, ProvisioningRequests, those `Actions`, the watchdog's requeues
and the plan's preemptions, each decided by its pure module
(`placeholder_actions`, `request_actions`, this one, `watchdog_actions`,
`preemption`) from the memory the sender of that kind keeps.

`plan()` decides from what the API server holds; some decisions also need what the
controller remembers of earlier passes (which cause a stuck gang's last Event named,
the free GPUs at the last nudge).
That memory is a plain value (`Memory`) the controller keeps and passes in;
`decide_actions(plan, pods, nodes, config, memory=, clock=)` returns the `Actions` of
the pass with the memory after it. The controller's executor
(`webhook.controller.executor`) only sends them and keeps the memory.

Pure: the plan, `PodInfo`s, Node dicts and plain values in, frozen values out. No
I/O, no clock of its own (`clock` is the caller's monotonic time).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..cluster.observed_gangs import PodInfo
from ..settings.config import Config
from .gang_events import Counted, Event
from .placeholder_actions import PlaceholderActions
from .preemption import Preemption
from .request_actions import RequestActions
from .requeue import NudgeMemory, nudges
from .results import Plan
from .stuck_events import Evented, stuck_events
from .watchdog_actions import WatchdogActions


@dataclass(frozen=True)
class Memory:
    """What the controller remembers between passes; a new process starts empty."""

    #: Stuck gang instance → (cause, members present) its last Event named.
    evented: Evented = field(default_factory=dict)
    #: The coscheduling nudge's: free GPUs at the last pass, when the second is due.
    nudge: NudgeMemory = field(default_factory=NudgeMemory)


@dataclass(frozen=True)
class Actions:
    """What one pass asks the executor to send, besides its releases."""

    events: tuple[Event, ...] = ()
    #: (namespace, name) of the coscheduling PodGroups to touch (`requeue`).
    nudges: tuple[tuple[str, str], ...] = ()
    #: Plan again after this many seconds even if nothing changes (None: no need).
    wake_after: float | None = None
    counts: tuple[Counted, ...] = ()
    #: The memory after this pass, for the next one.
    memory: Memory = Memory()


def decide_actions(
    result: Plan,
    pods: Iterable[PodInfo],
    nodes: Iterable[Mapping[str, Any]],
    config: Config,
    *,
    memory: Memory,
    clock: float,
) -> Actions:
    """The pass's actions besides its releases; `pods` and `nodes` are the ones the
    pass planned on (after its releases, as the controller's caches hold them)."""
    pods = list(pods)
    events, counts, evented = stuck_events(result.reports, pods, memory.evented, config)
    groups, wake_after, nudged = nudges(result.reports, pods, nodes, config,
                                        memory=memory.nudge, clock=clock)
    return Actions(
        events=tuple(events), nudges=tuple(groups), wake_after=wake_after,
        counts=tuple(counts), memory=Memory(evented=evented, nudge=nudged),
    )


@dataclass(frozen=True)
class PassActions:
    """Every action of one pass besides its releases, in the order they are sent
    (after the releases: a released gang's placeholders go before its gates)."""

    placeholders: PlaceholderActions
    #: None: no ProvisioningRequest is asked through, or the API is not served.
    requests: RequestActions | None
    #: Stuck-gang Events, PodGroup nudges, when to plan again.
    events_and_nudges: Actions
    watchdog: WatchdogActions
    #: The plan's; what is said after each is decided from its victims' outcomes
    #: (`preemption_actions`).
    preemptions: tuple[Preemption, ...]
