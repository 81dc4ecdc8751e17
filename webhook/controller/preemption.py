"""Carries out the plan's preemptions (decisions: `policies.release.preemption`, and
`policies.release.preemption_actions` for what is said and remembered).

For each `Preemption` of a pass as leader, after its `GangPreempting` Event:
- the victim gangs are requeued whole through their owners, as the watchdog requeues
  (`suspension`: a Job, JobSet or TrainJob suspended, and resumed once its pods are
  gone, so `backoffLimit: 0` does not fail it; a LeaderWorkerSet's or another
  recreating owner's pods deleted with a uid precondition). A preemption is not a
  rebind: it spends none of the gang's `rebindRetries`;
- the victim pods of no gang are evicted through the Eviction API (policy/v1), so
  PodDisruptionBudgets hold; a 429 is a refusal;
- each victim's outcome goes to `after_victims`, whose Events and counters are sent
  and whose leaving victims are remembered here and handed to the next passes
  (`leaving`).

May do API I/O (owner patches, pod deletes, evictions, Events); decides nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from gangkeeper.policies.cluster.observed_gangs import PodInfo
from gangkeeper.policies.release.preemption import Preemption, Unit
from gangkeeper.policies.release.preemption_actions import (
    after_victims,
    leaving_now,
    preempting_event,
)

from ..kube.api import Api, ApiError, NotFound, TooManyRequests
from ..kube.resources import PODS
from ..series import Count
from .events import GangEvents
from .watchdog import Watchdog
from .writes import WRITE_QUERY, delete_options

log = logging.getLogger(__name__)

#: Requeues by preemption are not bounded by `rebindRetries`.
_UNBOUNDED = 1 << 30


class Preemptions:
    """See the module docstring."""

    def __init__(
        self,
        rest: Api,
        events: GangEvents,
        watchdog: Watchdog,
        count: Count,
        *,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        self.rest = rest
        self.events = events
        self.watchdog = watchdog
        self._count = count
        self._may_write = may_write
        #: Victim pod uid -> when it was acted on.
        self._leaving: dict[str, float] = {}

    def leaving(self, pods: Iterable[PodInfo], now: float) -> frozenset[str]:
        """The victims still to go, for the next plan; gone or stale ones forgotten."""
        self._leaving = leaving_now(self._leaving, pods, now)
        return frozenset(self._leaving)

    def send(self, preemptions: Iterable[Preemption], now: float) -> None:
        """Take the victims of each of the plan's `preemptions`, and say so."""
        for found in preemptions:
            if not self._may_write():
                return
            self._preempt(found, now)

    def _preempt(self, found: Preemption, now: float) -> None:
        self.events.send(preempting_event(found))
        outcomes = [self._take(unit, now) for unit in found.victims]
        events, counts, leaving = after_victims(found, outcomes, now)
        self._leaving.update(leaving)
        for family, labels, value in counts:
            self._count(family, labels, value)
        for event in events:
            self.events.send(event)

    def _take(self, unit: Unit, now: float) -> str:
        """Requeue or evict one victim unit: started, refused or failed."""
        if unit.how == "evict":
            return self._evict(unit.pods[0])
        gang = unit.gang
        assert gang is not None
        if unit.how == "suspend":
            assert gang.owner is not None
            outcome, _ = self.watchdog.owners.suspend(
                gang.namespace, gang.owner, _UNBOUNDED, now
            )
            return "started" if outcome in ("suspended", "busy") else "failed"
        for member in unit.pods:
            self.watchdog.delete_pod(member.namespace, member.name, member.uid)
        return "started"

    def _evict(self, pod: PodInfo) -> str:
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
            "deleteOptions": delete_options(pod.uid),
        }
        path = f"{PODS.object_path(pod.namespace, pod.name)}/eviction"
        try:
            self.rest.request("POST", path, WRITE_QUERY, body=body)
        except TooManyRequests:
            return "refused"
        except NotFound:
            return "started"  # gone already: its room is free
        except ApiError as err:
            log.warning("evicting %s/%s: %s", pod.namespace, pod.name, err)
            return "failed"
        return "started"
