"""Posting the controller's Events.

`GangEvents.send(event)` posts an events.k8s.io/v1 Event — a decided
`policies.release.gang_events.Event`: stuck gangs', the watchdog's, preemptions',
releases', placeholders' and ProvisioningRequests' — on each object it regards, each
post fenced, on the release pool.

May do API I/O (Event creates, through the controller's pool); decides nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gangkeeper.policies.release.gang_events import Event

from ..kube.api import Api, ApiError
from .writes import WRITE_QUERY, event_body

log = logging.getLogger(__name__)


class GangEvents:
    """Posts the controller's Events about gangs; see the module docstring."""

    def __init__(
        self,
        rest: Api,
        identity: str,
        pool: Callable[[], ThreadPoolExecutor | None],
        *,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        """`may_write`: asked before each Event is posted (the controller's fencing)."""
        self.rest = rest
        self.identity = identity
        self._pool_of = pool
        self._may_write = may_write

    def send(self, event: Event) -> None:
        """Post `event` on each object it regards, through the pool."""
        pool = self._pool_of()
        assert pool is not None
        for target in event.regarding:
            path = f"/apis/events.k8s.io/v1/namespaces/{target['namespace']}/events"
            body = event_body(target, event.reason, event.note, self.identity, time.time())
            pool.submit(self._post_event, path, body)

    def _post_event(self, path: str, body: dict[str, Any]) -> None:
        if not self._may_write():
            return
        try:
            self.rest.request("POST", path, WRITE_QUERY, body=body)
        except ApiError as err:
            log.warning("event for %s: %s", body["regarding"].get("name"), err)
