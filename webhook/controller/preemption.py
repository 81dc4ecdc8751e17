"""Carry out the plan's preemptions (decisions: `policies.release.preemption`).

For each `Preemption` of a pass as leader:
- the victim gangs are requeued whole through their owners, as the watchdog requeues
  (`suspension`: a Job, JobSet or TrainJob suspended, and resumed once its pods are
  gone, so `backoffLimit: 0` does not fail it; a LeaderWorkerSet's or another
  recreating owner's pods deleted with a uid precondition). A preemption is not a
  rebind: it spends none of the gang's `rebindRetries`;
- the victim pods of no gang are evicted through the Eviction API (policy/v1), so
  PodDisruptionBudgets hold; a 429 is a refusal (counted, and a
  `GangPreemptionBlocked` Event on the preemptor): the next pass chooses again;
- Events: `GangPreempting` on the preemptor's members and owner (whom, why),
  `PreemptedByGang` on each victim (by whom, which priority); counters
  `gangkeeper_preemptions_total{outcome}` and `gangkeeper_preempted_gpus_total`.

The victims acted on are remembered (`leaving`) until their pods are gone or
`LEAVING_SECONDS` pass, and handed to the next passes, which count them as gone for
the preemptor and never choose them again: the room they leave is held for it by the
holding rule. Memory: one entry per victim pod, forgotten with the pod.

May do API I/O (owner patches, pod deletes, evictions, Events); decides nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.cluster.observed_gangs import PodInfo
from gangkeeper.policies.release.preemption import Preemption, Unit
from gangkeeper.policies.release.results import Plan

from ..kube.api import Api, ApiError, NotFound, TooManyRequests
from ..kube.resources import PODS
from ..series import Count
from .events import GangEvents
from .watchdog import Watchdog
from .writes import WRITE_QUERY, delete_options

log = logging.getLogger(__name__)

#: A victim not gone after this long is forgotten: the plan may choose it again.
LEAVING_SECONDS = 300.0
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
        if self._leaving:
            live = {p.uid for p in pods}
            self._leaving = {
                uid: since for uid, since in self._leaving.items()
                if uid in live and now - since < LEAVING_SECONDS
            }
        return frozenset(self._leaving)

    def apply(self, plan: Plan, now: float) -> None:
        for found in plan.preemptions:
            if not self._may_write():
                return
            self._preempt(found, now)

    def _preempt(self, found: Preemption, now: float) -> None:
        gang = found.preemptor
        who = f"gang {gang.namespace}/{gang.name} (priority {gang.priority})"
        self.events.post(gang.namespace, list(gang.members), cat.GANG_PREEMPTING, (
            f"{who} does not fit; preempting {found.summary()}"
        ))
        refused: list[str] = []
        for unit in found.victims:
            outcome = self._take(unit, now)
            self._count(cat.PREEMPTIONS, (("outcome", outcome),))
            if outcome == "refused":
                refused.append(unit.title)
                continue
            if outcome != "started":
                continue
            self._count(cat.PREEMPTED_GPUS, (), unit.gpus)
            self._leaving.update((p.uid, now) for p in unit.pods)
            namespace = unit.pods[0].namespace
            how = {"suspend": "requeued whole (its owner suspended, resumed once its "
                   "pods are gone)", "delete": "requeued whole (its pods deleted for "
                   "their owner to recreate)", "evict": "evicted"}[unit.how]
            self.events.post(namespace, list(unit.pods), cat.PREEMPTED_BY_GANG, (
                f"{unit.title} (priority {unit.priority}) {how}: preempted by {who}"
            ))
        if refused:
            self.events.post(gang.namespace, list(gang.members), cat.GANG_PREEMPTION_BLOCKED, (
                f"{who}: the Eviction API refused {', '.join(refused)} (a "
                "PodDisruptionBudget); victims are chosen again"
            ))

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
