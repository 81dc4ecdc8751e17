"""What operators watch about gangs, in Kueue's naming style: how many wait and why,
how long a complete gang waits for its release and for all of it to be bound, and how
long lifting the gates takes (gangs partly bound are the watchdog's gauges).

Exposed series (samples for `webhook.server.metrics`; the families are declared in
`policies.catalogue`): `PENDING_GANGS{reason}` (gauge) and the histograms
`GANG_LAST_MEMBER_TO_RELEASE`, `GANG_LAST_MEMBER_TO_ALL_BOUND` and
`GATE_REMOVAL_DURATION`, all by `backend`; and `queue_samples`, each waiting gang's
`GANG_QUEUE_POSITION{namespace,gang}` (the only per-gang series: bounded by
`QUEUE_SERIES`, the front of every queue first).

"Last member" is the newest member's creationTimestamp, which the API server keeps
to the second: the two wait histograms are exact to within one second, and the
buckets start at one second accordingly. Gate removal is timed on the controller's
own clock, from the first gate-removal patch of a release to the last answer.

Pure bookkeeping under a lock (the reconcile loop writes, a scrape reads): no I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import get_args

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.release.results import GangReport, Release, WaitCode

from ..series import Sample, Series

#: Why a gang waits (the label values of `PENDING_GANGS`).
PENDING_REASONS: tuple[str, ...] = tuple(c for c in get_args(WaitCode) if c)
#: Released gangs remembered until all their members are bound; a gang that never
#: binds completely (deleted, evicted) is forgotten when it leaves the reports.
_MAX_TRACKED = 10_000
#: Waiting gangs given a `GANG_QUEUE_POSITION` series, at most: a series per gang is
#: one per label pair, so a backlog of thousands of gangs must not become thousands of
#: series; the gangs nearest the front of their queue are kept (those about to go).
QUEUE_SERIES = 1_000


class GangTimings:
    """Fed by the gang controller (`released` after a release, `observe` after each
    plan); read by a metrics scrape (`samples`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: The three histograms (buckets: the catalogue's).
        self._series = Series()
        #: (namespace, gang label, arrived) -> (newest member's creation, backend).
        self._awaiting_bound: dict[tuple[str, str, float], tuple[float, str]] = {}
        self._pending = dict.fromkeys(PENDING_REASONS, 0)

    def released(self, release: Release, gate_seconds: float, now: float) -> None:
        """A gang's gates were lifted at `now` (epoch seconds) in `gate_seconds`."""
        gang = release.gang
        created = [p.created for p in (*gang.members, *release.pods) if p.created]
        with self._lock:
            self._series.observe(
                cat.GATE_REMOVAL_DURATION, max(gate_seconds, 0.0), _by(gang.backend))
            if not created:
                return
            last = max(created)
            self._series.observe(
                cat.GANG_LAST_MEMBER_TO_RELEASE, max(now - last, 0.0), _by(gang.backend))
            if len(self._awaiting_bound) < _MAX_TRACKED:
                key = (gang.namespace, gang.label, min(created))
                self._awaiting_bound[key] = (last, gang.backend)

    def observe(self, reports: Iterable[GangReport], now: float) -> None:
        """The gangs of the latest plan: pending counts, and those now all bound."""
        pending = dict.fromkeys(PENDING_REASONS, 0)
        seen: set[tuple[str, str, float]] = set()
        with self._lock:
            for report in reports:
                if report.state == "waiting" and report.code in pending:
                    pending[report.code] += 1
                if report.state == "waiting":
                    continue
                key = (report.namespace, report.label, report.arrived)
                seen.add(key)
                tracked = self._awaiting_bound.get(key)
                if tracked is not None and report.gated == 0 and report.bound == report.present:
                    last, backend = tracked
                    self._series.observe(
                        cat.GANG_LAST_MEMBER_TO_ALL_BOUND, max(now - last, 0.0), _by(backend))
                    del self._awaiting_bound[key]
            for key in [k for k in self._awaiting_bound if k not in seen]:
                del self._awaiting_bound[key]
            self._pending = pending

    def samples(self) -> dict[Sample, float]:
        with self._lock:
            out: dict[Sample, float] = {
                (cat.PENDING_GANGS.name, (("reason", reason),)): float(n)
                for reason, n in self._pending.items()
            }
        out.update(self._series.samples())
        return out


def _by(backend: str) -> tuple[tuple[str, str], ...]:
    return (("backend", backend),)


def queue_samples(reports: Iterable[GangReport]) -> dict[Sample, float]:
    """`GANG_QUEUE_POSITION` of the gangs of a plan that wait in a queue: at most
    `QUEUE_SERIES`, smallest positions first (the plan's order among equal ones); a gang
    that leaves its queue loses its series at the next pass."""
    placed = sorted(
        (r for r in reports if r.queue_position is not None),
        key=lambda r: r.queue_position or 0,
    )
    out: dict[Sample, float] = {}
    for report in placed:
        if len(out) >= QUEUE_SERIES:
            break
        labels = (("namespace", report.namespace), ("gang", report.name))
        # Two gangs of one name in a namespace: the one nearer the front is shown.
        out.setdefault((cat.GANG_QUEUE_POSITION.name, labels), float(report.queue_position or 0))
    return out
