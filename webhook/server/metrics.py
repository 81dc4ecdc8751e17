"""Prometheus metrics of the admission server, in the text exposition format (0.0.4).

The families are those `gangkeeper.policies.catalogue` declares; their series are kept
in a `webhook.series.Series` (the mechanism the gang controller uses too) and rendered
by `webhook.series.render`, with type and help from the catalogue. `Metrics` is
updated from the event loop (requests) and from watch threads (cache sync state);
every update takes a lock. Pure bookkeeping: no I/O, no HTTP (the app serves
`render()`).

The server's own series: admission duration (a histogram with `DURATION_BUCKETS`),
requests, rejections and decisions, cache sync, certificate expiry and reloads; plus
whatever extra collectors return (e.g. the gang controller's), each checked against
the catalogue at every scrape.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gangkeeper.policies import catalogue as cat

from ..series import Sample, Series, checked, number, render

#: Admission latency buckets (seconds): the API server's webhook timeout is 5 s and
#: interesting latencies are well under 10 ms.
DURATION_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)

#: A collector returns samples as {(series name, ((label, value), ...)): number}.
Collector = Callable[[], Mapping[Sample, float]]


@dataclass
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(DURATION_BUCKETS) + 1))
    total: float = 0.0

    def observe(self, seconds: float) -> None:
        # bisect_left: a value equal to a bound belongs to that bucket (le = "≤").
        self.counts[bisect.bisect_left(DURATION_BUCKETS, seconds)] += 1
        self.total += seconds


class Metrics:
    """The server's counters, gauges and histogram."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._durations: dict[tuple[str, str], _Histogram] = {}
        self._series = Series()
        self._series.add(cat.CERTIFICATE_RELOADS, (), 0.0)
        self._collectors: list[Collector] = []

    def observe_admission(
        self, endpoint: str, verdict: str, outcome: str, seconds: float, reason: str = ""
    ) -> None:
        """Record one answered AdmissionReview (or one refused request)."""
        with self._lock:
            hist = self._durations.get((endpoint, verdict))
            if hist is None:
                hist = self._durations[(endpoint, verdict)] = _Histogram()
            hist.observe(seconds)
        self._series.add(cat.ADMISSION_REQUESTS, (("endpoint", endpoint), ("outcome", outcome)))
        if reason:
            self._series.add(cat.ADMISSION_REJECTIONS, (("endpoint", endpoint), ("reason", reason)))
        # Kueue-style: every decision by verdict, with the rejection reason or, for an
        # admitted object, what was done with it.
        self._series.add(cat.ADMISSION_DECISIONS, (
            ("endpoint", endpoint), ("verdict", verdict), ("reason", reason or outcome)))

    def set_synced(self, resource: str, synced: bool) -> None:
        self._series.set(cat.CACHE_SYNCED, (("resource", resource),), float(synced))

    def set_certificate_expiry(self, unix_seconds: float) -> None:
        self._series.set(cat.CERTIFICATE_EXPIRY, (), unix_seconds)

    def count_certificate_reload(self) -> None:
        self._series.add(cat.CERTIFICATE_RELOADS)

    def add_collector(self, collector: Collector) -> None:
        """Extra samples computed at scrape time (e.g. by the gang controller)."""
        with self._lock:
            self._collectors.append(collector)

    def _duration_samples(self) -> dict[Sample, float]:
        name = cat.ADMISSION_DURATION.name
        out: dict[Sample, float] = {}
        with self._lock:
            durations = {k: (list(h.counts), h.total) for k, h in self._durations.items()}
        for (endpoint, verdict), (counts, total) in durations.items():
            base = (("endpoint", endpoint), ("verdict", verdict))
            running = 0
            for bound, count in zip((*DURATION_BUCKETS, math.inf), counts, strict=True):
                running += count
                out[(f"{name}_bucket", (*base, ("le", number(bound))))] = float(running)
            out[(f"{name}_sum", base)] = total
            out[(f"{name}_count", base)] = float(running)
        return out

    def render(self) -> str:
        with self._lock:
            collectors = list(self._collectors)
        samples = {**self._duration_samples(), **self._series.samples()}
        for collector in collectors:
            try:
                samples.update(checked(collector()))
            except Exception:  # a broken collector must not take /metrics down
                continue
        return render(samples)
