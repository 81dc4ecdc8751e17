"""`Executor`: sends everything a pass decided besides its releases (those are the
`releaser`'s), in one order, and keeps the memory the next pass's decisions need.

As leader, after the releases, `decide(plan, pods, nodes, requests, now)` collects
every action of the pass in one value (`policies.release.actions.PassActions`), each
kind decided by its pure function from the memory its sender keeps: placeholders
(`placeholders`), ProvisioningRequests (`provisioning`), the `Actions`
`decide_actions` decides from the plan and the `Memory` this executor holds — Events
about stuck gangs, coscheduling PodGroups to nudge, when to plan again, counters, and
the memory after the pass — the watchdog's requeues (`watchdog`) and the plan's
preemptions (`preemption`). `send_pass(actions, now)` sends them in that order,
through those senders, which record what the API answered. This module posts each
Event through `GangEvents`, sends each nudge (a merge patch of one annotation,
`requeue.requeue_patch`) on the release pool, fenced like every controller write,
and asks for a pass when the actions say when; it decides nothing.

May do API I/O (Event creates, PodGroup patches; the rest through the senders it is
given); holds the memory of one controller process (`forget` on taking the lead:
what changed while no one led is unknown).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.autoscaling.provisioning import RequestInfo
from gangkeeper.policies.cluster.observed_gangs import PodInfo
from gangkeeper.policies.release.actions import Actions, Memory, PassActions, decide_actions
from gangkeeper.policies.release.groups import COSCHEDULING
from gangkeeper.policies.release.requeue import NudgeMemory, requeue_patch
from gangkeeper.policies.release.results import Plan
from gangkeeper.policies.settings.config import Config

from ..kube.api import Api, ApiError
from ..kube.election import micro_time
from ..series import Count
from .events import GangEvents
from .placeholders import PlaceholderWriter
from .preemption import Preemptions
from .provisioning import ProvisioningRequests
from .watchdog import Watchdog

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Senders:
    """The controller's senders of asked-for capacity, requeues and preemptions."""

    placeholders: PlaceholderWriter
    #: None: no namespace asks through ProvisioningRequests.
    requests: ProvisioningRequests | None
    watchdog: Watchdog
    preemptions: Preemptions


class Executor:
    """Sends a pass's actions; see the module docstring."""

    def __init__(
        self,
        rest: Api,
        config: Config,
        events: GangEvents,
        pool: Callable[[], ThreadPoolExecutor],
        count: Count,
        *,
        wake: Callable[[], None],
        may_write: Callable[[], bool],
        senders: Senders | None = None,
    ) -> None:
        """`wake`: asks the controller for a pass; `may_write`: False when fenced (not
        surely the leader); `senders`: the other senders `send_pass` drives (None:
        only `send`, as a test of the Events and nudges does)."""
        self.rest = rest
        self.config = config
        self.senders = senders
        self._events = events
        self._pool = pool
        self._count = count
        self._wake = wake
        self._may_write = may_write
        #: What the last pass's decisions remembered, for the next pass.
        self.memory = Memory()

    def forget(self) -> None:
        """A new leader: what changed while no one led is unknown, so nudge once."""
        self.memory = replace(self.memory, nudge=NudgeMemory())

    def decide(
        self, result: Plan, pods: Sequence[PodInfo], nodes: Sequence[Mapping[str, Any]],
        requests: Sequence[RequestInfo] | None, now: float,
    ) -> PassActions:
        """Every action of the pass besides its releases: `pods` and `nodes` as the
        caches hold them after the releases; `requests`: the ProvisioningRequests the
        pass planned with (None: not served)."""
        senders = self._senders()
        return PassActions(
            placeholders=senders.placeholders.actions(result, pods),
            requests=(None if senders.requests is None or requests is None
                      else senders.requests.actions(result, requests)),
            events_and_nudges=decide_actions(result, pods, nodes, self.config,
                                             memory=self.memory, clock=time.monotonic()),
            watchdog=senders.watchdog.actions(result, now, pods),
            preemptions=result.preemptions,
        )

    def send_pass(self, actions: PassActions, now: float) -> None:
        """Send every action of the pass, in order (as leader, after the releases)."""
        senders = self._senders()
        senders.placeholders.send(actions.placeholders)
        if senders.requests is not None and actions.requests is not None:
            senders.requests.writer.send(actions.requests)
        self.send(actions.events_and_nudges)
        senders.watchdog.send(actions.watchdog, now)
        senders.preemptions.send(actions.preemptions, now)

    def _senders(self) -> Senders:
        assert self.senders is not None, "an executor of Events and nudges only"
        return self.senders

    def send(self, actions: Actions) -> None:
        """Post the Events, add the counters, send the nudges, keep the memory."""
        self.memory = actions.memory
        for family, labels, value in actions.counts:
            self._count(family, labels, value)
        for event in actions.events:
            self._events.send(event)
        if actions.wake_after is not None:
            timer = threading.Timer(actions.wake_after, self._wake)
            timer.daemon = True
            timer.start()
        if actions.nudges:
            body = requeue_patch(micro_time(time.time()))
            pool = self._pool()
            wait([pool.submit(self._nudge, namespace, name, body)
                  for namespace, name in actions.nudges])

    def _nudge(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        path = f"/apis/{COSCHEDULING.api_version}/namespaces/{namespace}/podgroups/{name}"
        if not self._may_write():
            return
        try:
            self.rest.request("PATCH", path, body=body,
                              content_type="application/merge-patch+json")
        except ApiError as err:
            if err.status != 404:  # gone with its workload: nothing to retry
                log.warning("nudging PodGroup %s/%s: %s", namespace, name, err)
            return
        log.info("PodGroup %s/%s nudged: GPUs were freed", namespace, name)
        self._count(cat.PODGROUP_REQUEUES)
