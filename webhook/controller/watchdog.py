"""Carries out the watchdog's decisions about released gangs (`policies.release`:
`recovery` finds the requeues, `watchdog_actions` decides what is done about them).

Each pass as leader: `actions` adopts the owners a predecessor left suspended (once
per term) and asks `watchdog_actions` from the plan, the memory this object keeps and
the owners held suspended; `send` resumes the owners it chose (`suspension`) and
sends the rest — member
deletes (a uid precondition: the pod read and no other; for a member read unbound,
also its resourceVersion: bound since, it stays) for their owner to recreate, owner
suspensions (what follows each is `after_suspend`'s, from the suspension's outcome;
none while a stuck member it is for has been bound since it was read),
`GangMemberStuck`, `GangNotReady`, `GangRequeued` and `GangMembersRecreated` Events,
the counters `gangkeeper_gang_rebinds_total` and
`gangkeeper_gang_requeues_total{cause,how}` — and keep the gauges
(`gangkeeper_gangs_partly_bound`, `gangkeeper_gang_partly_bound_seconds`,
`gangkeeper_gangs_not_ready`) for the next scrape.

May do API I/O (deletes, owner patches, Events); decides nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from gangkeeper.policies.catalogue import Metric
from gangkeeper.policies.cluster.observed_gangs import PodInfo
from gangkeeper.policies.release.gang_events import Counted, Event
from gangkeeper.policies.release.results import Plan
from gangkeeper.policies.release.watchdog_actions import (
    WatchdogActions,
    WatchdogMemory,
    after_suspend,
    watchdog_actions,
)
from gangkeeper.policies.settings.config import Config

from ..kube.api import Api, ApiError, Conflict, NotFound
from ..kube.resources import PODS
from ..series import Count
from .events import GangEvents
from .suspension import SuspendRequeuer
from .writes import WRITE_QUERY, delete_options

log = logging.getLogger(__name__)

#: Owners whose requeue counts are remembered (least recently requeued forgotten first).
MAX_TRACKED = 10_000


class Watchdog:
    """See the module docstring."""

    def __init__(
        self,
        rest: Api,
        config: Config,
        events: GangEvents,
        count: Count,
        *,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        """`may_write`: asked before each write (the controller's fencing)."""
        self.rest = rest
        self._may_write = may_write
        self.config = config
        self.events = events
        self._count = count
        #: What the decisions remember between passes (requeues done, Events said).
        self.memory = WatchdogMemory()
        self.owners = SuspendRequeuer(rest, may_write)
        #: The gauges of the last pass.
        self.gauges: dict[Metric, float] = {}

    def elected(self) -> None:
        self.owners.elected()

    def actions(self, plan: Plan, now: float, pods: Iterable[PodInfo] = ()) -> WatchdogActions:
        """This pass's decisions: `pods` are every live pod the controller keeps
        (deleting ones too). Lists the owners left suspended first, once per term."""
        self.owners.adopt(now)
        return watchdog_actions(plan, now, self.config, self.memory, pods=pods,
                                suspended=self.owners.held())

    def send(self, actions: WatchdogActions, now: float) -> None:
        """Resume, delete, suspend, post and count what `actions` says; keep its memory."""
        self.owners.resume(actions.resume)
        self.memory = actions.memory
        self.gauges = dict(actions.gauges)
        for member in actions.deletes:
            # A member unbound when read is deleted only as read: bound since (the
            # scheduler was slower than this pass's reads), it is left to run, or
            # the gang it just completed would lose it.
            self.delete_pod(member.namespace, member.name, member.uid,
                            "" if member.node_name else member.resource_version)
        self._send(actions.events, actions.counts)
        for requeue in actions.suspends:
            if not self._unbound_still(requeue.about):
                continue  # bound since this pass read it: the next pass decides again
            owner = requeue.gang.owner
            assert owner is not None  # `recovery` suspends only owners it can
            outcome, number = self.owners.suspend(
                requeue.gang.namespace, owner, self.config.rebind_retries, now)
            events, counts, self.memory = after_suspend(
                self.memory, requeue, outcome, number, self.config)
            self._send(events, counts)

    def _send(self, events: Iterable[Event], counts: Iterable[Counted]) -> None:
        for family, labels, value in counts:
            self._count(family, labels, value)
        for event in events:
            self.events.send(event)

    def _unbound_still(self, members: Iterable[PodInfo]) -> bool:
        """Whether every member read unbound is still unbound (read again): suspending
        an owner deletes all its pods, so a stale read must not suspend a gang the
        scheduler has just bound whole. A member gone, or a failed read, does not
        hold the requeue back (the gang is not whole then either)."""
        for member in members:
            if member.node_name:
                continue
            try:
                pod = self.rest.get(PODS.object_path(member.namespace, member.name))
            except ApiError:
                continue
            meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
            if meta.get("uid") != member.uid or spec.get("nodeName"):
                return False
        return True

    def delete_pod(self, namespace: str, name: str, uid: str, resource_version: str = ""
                   ) -> None:
        """Delete the pod read (a uid precondition; with `resource_version`, unchanged
        since), if this replica may write."""
        if not self._may_write():
            return
        try:
            self.rest.request("DELETE", PODS.object_path(namespace, name), WRITE_QUERY,
                              body=delete_options(uid, resource_version=resource_version))
        except (NotFound, Conflict):
            pass  # gone already, or another pod by now
        except ApiError as err:
            log.warning("deleting stuck member %s/%s: %s", namespace, name, err)
