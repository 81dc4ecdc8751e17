"""What the two writers of asked-for capacity share: placeholder pods
(`placeholders.PlaceholderWriter`) and ProvisioningRequests
(`provisioning.RequestWriter`) carry out a plan's decisions with the same API client,
config, worker pool, Event and counter sinks, write query and leader fence.

Holds references only: no I/O of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from gangkeeper.policies.release.gang_events import Event
from gangkeeper.policies.settings.config import Config

from ..kube.api import Api
from ..series import Count

#: Posts one decided Event on each object it regards (`GangEvents.send`).
Emit = Callable[[Event], None]


class CapacityWriter:
    """The controller's handles a capacity writer writes through."""

    def __init__(
        self,
        rest: Api,
        config: Config,
        *,
        pool: Callable[[], ThreadPoolExecutor],
        emit: Emit,
        count: Count,
        write_query: tuple[tuple[str, str], ...],
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        """`may_write`: the controller's fence (still surely the leader)."""
        self._rest = rest
        self._config = config
        self._pool = pool
        self._emit = emit
        self._count = count
        self._query = write_query
        self._may_write = may_write
        self._init_state()

    def _init_state(self) -> None:
        """A writer's own state (what it remembers between passes), set up here."""
