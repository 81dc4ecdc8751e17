"""`Nudges`: after a pass in which GPUs were freed, touch the released coscheduling
PodGroups whose pods are not all bound, so the Coscheduling plugin retries them now
rather than at its 5-minute flush (`policies.release.requeue` says why).

What to nudge and whether capacity rose are decided by the pure `requeue` module;
this one keeps the last pass's free GPUs (the memory the comparison needs) and sends
the merge patches through the release pool, each fenced like every controller write.

May PATCH PodGroups (one annotation); reads nothing from the API.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.cluster.observed_gangs import PodInfo
from gangkeeper.policies.release.groups import COSCHEDULING
from gangkeeper.policies.release.requeue import (
    FreeGpus,
    capacity_rose,
    free_gpus,
    groups_to_nudge,
    requeue_patch,
)
from gangkeeper.policies.release.results import GangReport
from gangkeeper.policies.settings.config import Config

from ..kube.api import Api, ApiError
from ..kube.election import micro_time
from ..series import Count

log = logging.getLogger(__name__)

#: Seconds after a capacity change at which unbound coscheduling gangs are nudged again.
REQUEUE_AGAIN_SECONDS = 2.0


class Nudges:
    """The coscheduling nudge of one controller; see the module docstring."""

    def __init__(
        self,
        rest: Api,
        config: Config,
        pool: Callable[[], ThreadPoolExecutor],
        count: Count,
        *,
        wake: Callable[[], None],
        may_write: Callable[[], bool],
    ) -> None:
        """`wake`: asks the controller for a pass (the second nudge's timer);
        `may_write`: False when fenced (not surely the leader)."""
        self.rest = rest
        self._config = config
        self._pool = pool
        self._count = count
        self._wake = wake
        self._may_write = may_write
        #: Free GPUs per (node, resource) at the last pass as leader; None until one.
        self._free: FreeGpus | None = None
        self._renudge_at: float | None = None

    def forget(self) -> None:
        """A new leader: what changed while no one led is unknown, so nudge once."""
        self._free = None

    def after_pass(
        self,
        reports: tuple[GangReport, ...],
        pods: Iterable[PodInfo],
        nodes: Iterable[Mapping[str, Any]],
    ) -> None:
        pods = list(pods)
        groups = groups_to_nudge(reports, pods)
        if not groups:
            # Nothing to nudge: no snapshot to keep either (the next gang that needs
            # one is nudged once, which costs one patch).
            self._free, self._renudge_at = None, None
            return
        free = free_gpus(nodes, pods, self._config)
        rose = capacity_rose(self._free, free)
        self._free = free
        now = time.monotonic()
        if rose:
            # The scheduler may retry before its own cache has the freed GPUs and
            # park the pods again; a second nudge a little later covers that race
            # (one pending at a time, however often GPUs free up meanwhile).
            if self._renudge_at is None:
                self._renudge_at = now + REQUEUE_AGAIN_SECONDS
                timer = threading.Timer(REQUEUE_AGAIN_SECONDS, self._wake)
                timer.daemon = True
                timer.start()
        elif self._renudge_at is not None and now >= self._renudge_at:
            self._renudge_at = None
        else:
            return
        body = requeue_patch(micro_time(time.time()))
        pool = self._pool()
        wait([pool.submit(self._nudge, namespace, name, body) for namespace, name in groups])

    def _nudge(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        path = f"/apis/{COSCHEDULING.api_version}/namespaces/{namespace}/podgroups/{name}"
        if not self._may_write():
            return
        try:
            self.rest.request("PATCH", path, body=body, content_type="application/merge-patch+json")
        except ApiError as err:
            if err.status != 404:  # gone with its workload: nothing to retry
                log.warning("nudging PodGroup %s/%s: %s", namespace, name, err)
            return
        log.info("PodGroup %s/%s nudged: GPUs were freed", namespace, name)
        self._count(cat.PODGROUP_REQUEUES)
