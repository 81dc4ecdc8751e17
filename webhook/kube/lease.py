"""`LeaderElector`: acquire and renew a coordination.k8s.io/v1 Lease, like client-go.

A loop (in the caller's thread) reads the Lease, asks `election.next_lease` what to
do, and writes the answer; a write that loses a race (409, 422) is simply not ours
this round. Leadership ends when no renewal succeeded for `renew_deadline`;
`release()` gives the Lease up on shutdown so another replica takes over at once.

Fencing: leader election alone does not stop a paused leader (SIGSTOP, a long GC, a
frozen VM) from writing after another replica took over — its flag is still set when
it wakes. So `is_leader` is also judged on our monotonic clock: it holds only while
the last successful renewal *attempt began* less than `renew_deadline` ago (others
count the lease from when they saw that write, which is later), and `confirm()`
re-reads the Lease before a write burst. A paused leader wakes up no longer leading,
before its elector thread has even run.

I/O (through an `Api`); the decisions are election.py's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .api import Api, ApiError, Conflict, Invalid, NotFound, Query
from .election import Observation, next_lease, released_lease

log = logging.getLogger(__name__)


class LeaderElector:
    """One identity competing for one Lease; see the module docstring."""

    def __init__(
        self, api: Api, *, namespace: str, name: str, identity: str,
        lease_duration: float, renew_deadline: float, retry_period: float,
        write_query: Query = (), on_elected: Callable[[], None] = lambda: None,
    ) -> None:
        """Seconds: a lease is held for `lease_duration`, lost after `renew_deadline`
        without a renewal, and tried every `retry_period`."""
        self._api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self._duration = lease_duration
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        self._write_query = write_query
        self._on_elected = on_elected
        self._leader = threading.Event()
        self._attempt_at = 0.0
        #: Monotonic time at which the last successful renewal attempt began.
        self._renewed_at = float("-inf")

    @property
    def is_leader(self) -> bool:
        """Leading, and renewed recently enough that no other replica can lead yet."""
        return self.holds()

    def holds(self, margin: float = 0.0) -> bool:
        """Whether we lead and will still for `margin` seconds on our own clock."""
        if not self._leader.is_set():
            return False
        return time.monotonic() + margin - self._renewed_at < self._renew_deadline

    def confirm(self) -> bool:
        """Re-read the Lease: still ours, and still within our deadline? (Before a burst
        of writes; a stale leader finds another holder and steps down at once.)"""
        if not self.holds():
            return False
        try:
            lease = self._api.get(self._path(self.name))
        except ApiError as err:
            log.warning("confirming lease %s/%s: %s", self.namespace, self.name, err)
            return False
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        if holder != self.identity:
            log.warning("%s lost the lease %s to %r", self.identity, self.name, holder)
            self._leader.clear()
            return False
        return self.holds()

    def _path(self, name: str = "") -> str:
        base = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"
        return f"{base}/{name}" if name else base

    def _try(self, observed: Observation | None) -> tuple[bool, Observation | None]:
        self._attempt_at = time.monotonic()
        try:
            lease: Mapping[str, Any] | None = self._api.get(self._path(self.name))
        except NotFound:
            lease = None
        step = next_lease(
            lease,
            name=self.name,
            namespace=self.namespace,
            identity=self.identity,
            duration_seconds=max(1, round(self._duration)),
            wall=time.time(),
            monotonic=time.monotonic(),
            observed=observed,
        )
        if step.action == "wait":
            return False, step.observation
        method, path = ("POST", self._path()) if step.action == "create" else (
            "PUT", self._path(self.name)
        )
        try:
            self._api.request(method, path, self._write_query, body=step.body)
        except (Conflict, Invalid):  # someone else wrote first: not ours this round
            return False, step.observation
        return True, step.observation

    def run(self, stop: threading.Event) -> None:
        """Compete until `stop` is set (then leadership is not given up: `release`)."""
        observed: Observation | None = None
        last_renew = 0.0
        while not stop.is_set():
            try:
                ok, observed = self._try(observed)
            except ApiError as err:
                log.warning("lease %s/%s: %s", self.namespace, self.name, err)
                ok = False
            now = time.monotonic()
            if ok:
                last_renew = now
                self._renewed_at = self._attempt_at
                if not self._leader.is_set():
                    log.info("%s became the leader (lease %s)", self.identity, self.name)
                    self._leader.set()
                    self._on_elected()
            elif self._leader.is_set() and now - last_renew > self._renew_deadline:
                # (holds() already said no since the deadline; this logs it and
                # makes the next success a fresh election, with on_elected.)
                log.warning("%s lost the lease %s", self.identity, self.name)
                self._leader.clear()
            stop.wait(self._retry_period)

    def release(self) -> None:
        """Give the Lease up if we hold it, so the next replica need not wait it out."""
        if not self._leader.is_set():
            return
        self._leader.clear()
        try:
            lease = self._api.get(self._path(self.name))
            body = released_lease(lease, self.identity)
            if body is not None:
                self._api.request("PUT", self._path(self.name), self._write_query, body=body)
        except ApiError as err:
            log.info("could not release lease %s: %s", self.name, err)
