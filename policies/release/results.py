"""What a planning pass returns: the releases to perform, every gang's report, and the
other writes the controller sends (placeholders, ProvisioningRequests, requeues,
preemptions), with how long the answer holds.

Frozen dataclasses only; `plan.plan` builds them and the controller, `status`,
`explain`, `ungate` and the view read them. No I/O, no decisions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..autoscaling.asking import Ask
from ..autoscaling.provisioning import RequestAsk, RequestInfo
from ..cluster.observed_gangs import GangObservation, PodInfo
from .preemption import Preemption
from .recovery import Requeue

State = Literal["released", "releasing", "waiting"]
#: Why a gang waits: machine-readable, for metrics and Event reasons.
WaitCode = Literal[
    "", "incomplete", "no-fit", "held", "invalid", "provisioning", "preempting"
]


@dataclass(frozen=True)
class GangReport:
    """One gang as `gangkeeper status` shows it."""

    namespace: str
    name: str
    label: str
    backend: str
    min_member: int | None
    present: int
    gated: int
    bound: int
    state: State
    code: WaitCode
    #: Why it waits (a sentence with numbers), or what is being done.
    reason: str
    #: Seconds since the oldest live member was created.
    age_seconds: float
    #: Creation time (epoch seconds) of the oldest live member: identifies this gang
    #: instance when a gang of the same name comes back later.
    arrived: float
    #: Waiting for longer than `Config.gang_timeout_seconds`.
    stuck: bool
    #: Member → node, for members bound or pinned (by this pass or an earlier one).
    assignment: tuple[tuple[str, str], ...] = ()
    #: The gang's priority (its members' highest `spec.priority`).
    priority: int = 0
    #: Its place among the gangs waiting for nodes it may use (`queue`): 1-based, None
    #: unless it waits for room.
    queue_position: int | None = None
    #: The gangs of that queue (itself included); 0 when it is in none.
    queue_length: int = 0
    #: The first gangs ahead of it ("namespace/name", front first; `queue.AHEAD_SHOWN`
    #: at most: `queue_position - 1` are ahead in all).
    ahead: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "gang": self.name,
            "label": self.label,
            "backend": self.backend,
            "minMember": self.min_member,
            "present": self.present,
            "gated": self.gated,
            "bound": self.bound,
            "state": self.state,
            "code": self.code,
            "reason": self.reason,
            "ageSeconds": round(self.age_seconds, 1),
            "stuck": self.stuck,
            "priority": self.priority,
            "queuePosition": self.queue_position,
            "queueLength": self.queue_length,
            "ahead": list(self.ahead),
            "assignment": dict(self.assignment),
        }


@dataclass(frozen=True)
class Release:
    """Lift gangkeeper's gate from `pods`; create the group object first if asked."""

    gang: GangObservation
    pods: tuple[PodInfo, ...]
    #: The backend needs a PodGroup (or native group) object before the gates go.
    needs_group: bool
    #: Pod uid → name of the node to pin the pod to in the gate-lifting patch
    #: (placement `pinned`); a pod not in it is released unpinned.
    pins: Mapping[str, str] = field(default_factory=dict)
    #: Why a gate-backend gang goes unpinned (an Event says so); "" otherwise.
    unpinned: str = ""
    #: The gang's placeholder pods, deleted before the gates go (their room is its).
    placeholders: tuple[PodInfo, ...] = ()
    #: Annotations added in the gate-lifting patch (a provisioned request's consumers).
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def needs_nothing_first(self) -> bool:
        """Its gates may go the moment it is decided: no group object to create and
        no placeholder to delete before them."""
        return not self.needs_group and not self.placeholders


@dataclass(frozen=True)
class Plan:
    releases: tuple[Release, ...]
    reports: tuple[GangReport, ...]
    #: Placeholders to create or delete for gangs that wait for nodes, and those no
    #: gang needs any more (gang gone, released, or not asking).
    asks: tuple[Ask, ...] = ()
    orphans: tuple[PodInfo, ...] = ()
    #: ProvisioningRequests to create or delete, and those no gang needs any more.
    request_asks: tuple[RequestAsk, ...] = ()
    request_orphans: tuple[RequestInfo, ...] = ()
    #: The gangs the pass saw, in its order (the controller's watchdog reads them).
    gangs: tuple[GangObservation, ...] = ()
    #: Released gangs to bring back to all-or-nothing (`recovery`; the watchdog acts).
    requeues: tuple[Requeue, ...] = ()
    #: Lower-priority work to preempt for waiting gangs (`preemption`).
    preemptions: tuple[Preemption, ...] = ()
    #: Until when (epoch seconds) a pass of the same cluster decides the same, only the
    #: ages moving: the earliest deadline a decision waits for (a gang turning stuck, a
    #: member's `rebindSeconds`, `podsReadyTimeoutSeconds`); the pass's own time when a
    #: decision reads the clock itself (an autoscaler ask, a replacement's wait).
    valid_until: float = math.inf

    @property
    def quiet(self) -> bool:
        """Nothing to do: no release, requeue, preemption, placeholder or request write."""
        return not (
            self.releases or self.requeues or self.preemptions or self.asks or self.orphans
            or self.request_asks or self.request_orphans
        )
