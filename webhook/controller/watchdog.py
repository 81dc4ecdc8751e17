"""The controller's watchdog over released gangs (decisions: `policies.release.recovery`).

Each pass as leader, for every requeue the plan asks for (`Plan.requeues`):
- members pinned and still unbound after `rebindSeconds`, and (with
  `podsReadyRequeue: true`) gangs bound whole but not all Ready after
  `podsReadyTimeoutSeconds`: the gang of a Job, JobSet or TrainJob is requeued by
  suspending its owner and resuming it (`suspension`: no pod counts as failed, so
  `backoffLimit: 0` holds);
  another owner's chosen members (the stuck ones, or the whole gang, `rebindScope`)
  are deleted (the UID precondition makes sure it is the pod that was read) for it
  to recreate; the webhook gates the new pods and the plan places them anew — at most
  `rebindRetries` times per gang; otherwise (bare pods, retries spent) a
  `GangMemberStuck` Event, once per member;
- gangs bound whole but not all Ready after `podsReadyTimeoutSeconds`: a
  `GangNotReady` Event, once per gang instance;
- gauges: gangs partly bound now and the longest time one has been
  (`gangkeeper_gangs_partly_bound`, `gangkeeper_gang_partly_bound_seconds`), gangs
  not Ready (`gangkeeper_gangs_not_ready`); counters: `gangkeeper_gang_rebinds_total`,
  `gangkeeper_gang_requeues_total{cause,how}`.

A suspended owner's requeue count is an annotation on it (every leader reads the same);
the others' are kept in memory by owner (a new leader starts again at zero: at most one
more round per gang per leader change), bounded by `MAX_TRACKED` owners. May do API
I/O (deletes, Job patches, Events).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.catalogue import Metric
from gangkeeper.policies.cluster.observed_gangs import PodInfo
from gangkeeper.policies.release.recovery import Requeue, owner_kind
from gangkeeper.policies.release.results import Plan
from gangkeeper.policies.release.watchdog import never_ready, partly_bound, partly_bound_for
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
        #: Requeues done per (namespace, owner uid or gang label), oldest first.
        self._retries: OrderedDict[tuple[str, str], int] = OrderedDict()
        #: (gang namespace, gang name, member uid) already told they are stuck: one
        #: Event per member however the set of stuck members changes pass to pass.
        self._reported: set[tuple[str, str, str]] = set()
        self._not_ready: set[tuple[str, str, float]] = set()
        self.owners = SuspendRequeuer(rest, may_write)
        #: The gauges of the last pass.
        self.gauges: dict[Metric, float] = {}

    def elected(self) -> None:
        self.owners.elected()

    def check(self, plan: Plan, now: float, pods: Iterable[PodInfo] = ()) -> None:
        """One pass: `pods` are every live pod the controller keeps (deleting ones too)."""
        live = {g.key for g in plan.gangs}
        self._reported = {k for k in self._reported if k[:2] in live}
        self._not_ready = {k for k in self._not_ready if k[:2] in live}
        self.owners.adopt(now)
        # An owner resumed in this pass may still show its old pods: not requeued again yet.
        resumed = {held.uid for held in self.owners.resume(pods, now)}
        partial = [g for g in plan.gangs if partly_bound(g)]
        self.gauges = {
            cat.GANGS_PARTLY_BOUND: float(len(partial)),
            cat.GANG_PARTLY_BOUND_SECONDS: max(
                (partly_bound_for(g, now) for g in partial), default=0.0
            ),
            cat.GANGS_NOT_READY: 0.0,
        }
        for gang in plan.gangs:
            if never_ready(gang, now, self.config):
                self.gauges[cat.GANGS_NOT_READY] += 1
                key = (*gang.key, gang.arrived)
                if key not in self._not_ready:
                    self._not_ready.add(key)
                    self.events.post(gang.namespace, list(gang.members), cat.GANG_NOT_READY, (
                        f"gang {gang.namespace}/{gang.name}: all {gang.present} members bound "
                        f"but not all Ready {self.config.pods_ready_timeout_seconds}s after "
                        "release (image pull, crash loop?)"
                    ))
        for requeue in plan.requeues:
            owner = requeue.gang.owner
            if owner is None or owner.uid not in resumed:
                self._requeue(requeue, now)

    def _key(self, requeue: Requeue) -> tuple[str, str]:
        owner = requeue.gang.owner
        return (requeue.gang.namespace, owner.uid if owner is not None else requeue.gang.label)

    def _requeue(self, requeue: Requeue, now: float) -> None:
        gang, limit = requeue.gang, self.config.rebind_retries
        if requeue.how == "report":
            self._stuck(requeue, "its pods are not recreated by an owner")
            return
        if self.owners.busy(gang.owner):
            return
        key = self._key(requeue)
        done = self._retries.get(key, 0)
        if done >= limit:
            self._stuck(requeue, "retries spent")
            return
        if requeue.how == "suspend":
            assert gang.owner is not None
            # The count on the owner is the one every leader sees: it decides.
            outcome, number = self.owners.suspend(gang.namespace, gang.owner, limit, now)
            if outcome == "spent":
                self._remember(key, number)
                self._stuck(requeue, "retries spent")
            if outcome != "suspended":
                return
        else:
            number = done + 1
            for member in requeue.delete:
                self.delete_pod(member.namespace, member.name, member.uid)
        self._remember(key, number)
        self._count(cat.GANG_REQUEUES, (("cause", requeue.cause), ("how", requeue.how)))
        if requeue.cause == "rebind":
            self._count(cat.GANG_REBINDS)
        self._announce(requeue, number)

    def _remember(self, key: tuple[str, str], number: int) -> None:
        self._retries[key] = number
        self._retries.move_to_end(key)
        while len(self._retries) > MAX_TRACKED:
            self._retries.popitem(last=False)

    def _announce(self, requeue: Requeue, number: int) -> None:
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
        self.events.post(gang.namespace, list(requeue.about), reason, (
            f"{who}: {what}; {done} (retry {number} of {self.config.rebind_retries})"
        ))

    def _stuck(self, requeue: Requeue, why: str) -> None:
        gang = requeue.gang
        if requeue.cause != "rebind":
            return  # not Ready: the GangNotReady Event says it already
        fresh = [m for m in requeue.about if (*gang.key, m.uid) not in self._reported]
        if not fresh:
            return
        self._reported.update((*gang.key, m.uid) for m in fresh)
        names = ", ".join(sorted(m.name for m in requeue.about))
        hint = (
            f"suspend and resume the {owner_kind(gang)} to place the "
            "gang anew" if requeue.how == "suspend"
            else "delete them to place the gang anew"
        )
        self.events.post(gang.namespace, fresh, cat.GANG_MEMBER_STUCK, (
            f"gang {gang.namespace}/{gang.name}: {names} pinned but unbound "
            f"for {int(requeue.waited)}s; not requeued ({why}): {hint}"
        ))

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        """Delete the pod read (a uid precondition), if this replica may write."""
        if not self._may_write():
            return
        try:
            self.rest.request("DELETE", PODS.object_path(namespace, name), WRITE_QUERY,
                              body=delete_options(uid))
        except (NotFound, Conflict):
            pass  # gone already, or another pod by now
        except ApiError as err:
            log.warning("deleting stuck member %s/%s: %s", namespace, name, err)
