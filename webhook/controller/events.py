"""Events about gangs: stuck ones (once per gang instance, cause and member count per
process), and gangs released unpinned.

`GangEvents.stuck(reports, pods)` posts an events.k8s.io/v1 Warning to the owner and
up to `EVENT_POD_LIMIT` member pods of every gang that has waited longer than
`gangTimeoutSeconds`, and forgets gangs that are gone, so its memory is bounded by
the live gangs. `GangEvents.unpinned(gang, why)` says why a gate-backend gang was
released without pins (a constraint the assigner does not model).

May do API I/O (Event creates, through the controller's pool); decides nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.cluster.observed_gangs import GangObservation, PodInfo
from gangkeeper.policies.release.results import GangReport
from gangkeeper.policies.settings.config import Config

from ..kube.api import Api, ApiError
from ..series import Count
from .writes import EVENT_POD_LIMIT, WRITE_QUERY, event_body

log = logging.getLogger(__name__)



class GangEvents:
    """Posts the controller's Events about gangs; see the module docstring."""

    def __init__(
        self,
        rest: Api,
        config: Config,
        identity: str,
        pool: Callable[[], ThreadPoolExecutor | None],
        count: Count,
        *,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        """`may_write`: asked before each Event is posted (the controller's fencing)."""
        self.rest = rest
        self.config = config
        self.identity = identity
        self._pool_of = pool
        self._count = count
        self._may_write = may_write
        #: Gang instance (namespace, label, arrival) -> what its last Event said:
        #: (cause, members present). At most one entry per live gang.
        self._evented: dict[tuple[str, str, float], tuple[str, int]] = {}

    def stuck(self, reports: tuple[GangReport, ...], pods: Iterable[PodInfo]) -> None:
        # Forget gangs that are gone, so the memory stays bounded by live gangs.
        live = {(r.namespace, r.label, r.arrived) for r in reports}
        self._evented = {k: v for k, v in self._evented.items() if k in live}
        pods_by_gang: dict[tuple[str, str], list[PodInfo]] | None = None
        for report in reports:
            if not report.stuck:
                continue
            # Again when the cause or the number of members changes (a member created
            # after the first report gets one, and the note says the new count), not
            # on every pass: numbers of free GPUs in a reason would make a storm.
            key = (report.namespace, report.label, report.arrived)
            said = (report.code, report.present)
            if self._evented.get(key) == said:
                continue
            self._evented[key] = said
            if pods_by_gang is None:
                pods_by_gang = {}
                for pod in pods:
                    if pod.gang:
                        pods_by_gang.setdefault((pod.namespace, pod.gang), []).append(pod)
            members = pods_by_gang.get((report.namespace, report.label), [])
            self._emit(report, members)

    def _emit(self, report: GangReport, members: list[PodInfo]) -> None:
        reason = cat.WAIT_REASONS[report.code]
        note = (
            f"gang {report.namespace}/{report.name} waiting "
            f"{int(report.age_seconds)}s (timeout {self.config.gang_timeout_seconds}s): "
            f"{report.reason}"
        )
        self.post(report.namespace, members, reason, note)
        self._count(cat.GANG_STUCK_REPORTS, (("reason", report.code),))

    def unpinned(self, gang: GangObservation, why: str) -> None:
        note = (
            f"gang {gang.namespace}/{gang.name} released without pinning its members "
            f"to nodes (the scheduler places them): {why}"
        )
        self.post(gang.namespace, list(gang.members), cat.GANG_RELEASED_UNPINNED, note)
        self._count(cat.GANG_UNPINNED_RELEASES)

    def post(self, namespace: str, members: list[PodInfo], reason: str, note: str) -> None:
        """A Warning to the owner of `members` and up to `EVENT_POD_LIMIT` of them."""
        targets: list[dict[str, str]] = []
        owner = next((m.owner for m in members if m.owner is not None), None)
        if owner is not None:
            targets.append({"apiVersion": owner.api_version, "kind": owner.kind,
                            "name": owner.name, "uid": owner.uid,
                            "namespace": namespace})
        for member in members[:EVENT_POD_LIMIT]:
            targets.append({"apiVersion": "v1", "kind": "Pod", "name": member.name,
                            "uid": member.uid, "namespace": member.namespace})
        path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
        pool = self._pool_of()
        assert pool is not None
        for target in targets:
            body = event_body(target, reason, note, self.identity, time.time())
            pool.submit(self._post_event, path, body)

    def _post_event(self, path: str, body: dict[str, Any]) -> None:
        if not self._may_write():
            return
        try:
            self.rest.request("POST", path, WRITE_QUERY, body=body)
        except ApiError as err:
            log.warning("event for %s: %s", body["regarding"].get("name"), err)
