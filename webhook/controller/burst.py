"""`Burst`: one pass's gate-lifting patches, sent as each release is decided.

The plan tells of each release the moment it decides it (`plan`'s `on_release`); a
release that needs nothing written before its gates go (no group object, no
placeholders to delete first) has its patches submitted to the release pool at
once, while the pass goes on with the next gang. So a gang's gates do not wait for
the other gangs of the pass. The rest — groups first, placeholders first — are sent
after the pass by the controller (`GangController._release_all`), which then waits
for every patch of the burst, early or not, and counts them.

Leadership is confirmed once per burst, before its first write (the Lease re-read,
as before a burst sent after the pass); a pass that is not the leader's, or one
checked against a from-scratch plan, sends nothing early.

May submit writes to the pool through the callables it is given; decides nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from gangkeeper.policies.cluster.observed_gangs import PodInfo
from gangkeeper.policies.release.results import Release

#: Lifts one pod's gate (pinned to a node, with annotations): "ungated", or why not.
Ungate = Callable[[PodInfo, "str | None", "Mapping[str, str] | None"], str]


class Burst:
    """The patches of one pass's releases; see the module docstring."""

    def __init__(
        self,
        pool: ThreadPoolExecutor,
        ungate: Ungate,
        *,
        confirm: Callable[[], bool],
        before_first: Callable[[], None] = lambda: None,
        early: bool = True,
    ) -> None:
        """`confirm`: re-reads the Lease (True: still the leader); `before_first`: runs
        once, before the first write (the `before-group` fault step); `early`: send
        releases as they are decided (False: all after the pass)."""
        self._pool = pool
        self._ungate = ungate
        self._confirm = confirm
        self._before_first = before_first
        self._early = early
        self._confirmed: bool | None = None
        #: id(release) → pod uid → its patch, for the releases already sent.
        self._sent: dict[int, dict[str, Future[str]]] = {}

    def confirmed(self) -> bool:
        """Still the leader, as re-read once for this burst."""
        if self._confirmed is None:
            self._confirmed = self._confirm()
            if self._confirmed:
                self._before_first()
        return self._confirmed

    def decided(self, release: Release) -> None:
        """The plan's `on_release`: send it now if nothing must be written first."""
        if not self._early or not release.needs_nothing_first:
            return
        if self.confirmed():
            self._sent[id(release)] = self.submit(release)

    def submit(self, release: Release) -> dict[str, Future[str]]:
        """This release's patches (the ones sent early, or sent now)."""
        sent = self._sent.get(id(release))
        if sent is not None:
            return sent
        return {
            pod.uid: self._pool.submit(
                self._ungate, pod, release.pins.get(pod.uid), release.annotations
            )
            for pod in release.pods
        }

    def was_sent(self, release: Release) -> bool:
        """Sent while the pass was still deciding."""
        return id(release) in self._sent

    @property
    def early_count(self) -> int:
        """Releases sent before the pass ended."""
        return len(self._sent)
