"""Prometheus metrics of the admission server, in the text exposition format (0.0.4).

The families are those `gangkeeper.policies.catalogue` declares; their series are kept
in a `webhook.series.Series` (the mechanism the gang controller uses too) and rendered
by `webhook.series.render`, with type and help from the catalogue. `Metrics` is
updated from the event loop (requests) and from watch threads (cache sync state);
every update takes a lock. Pure bookkeeping: no I/O, no HTTP (the app serves
`render()`).

The server's own series: admission duration (a histogram),
requests, rejections and decisions, cache sync, certificate expiry and reloads; plus
whatever extra collectors return (e.g. the gang controller's), each checked against
the catalogue at every scrape.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from gangkeeper.policies import catalogue as cat

from ..series import Sample, Series, checked, render

#: A collector returns samples as {(series name, ((label, value), ...)): number}.
Collector = Callable[[], Mapping[Sample, float]]


class Metrics:
    """The server's series and the collectors read at each scrape."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._series = Series()
        self._series.add(cat.CERTIFICATE_RELOADS, (), 0.0)
        self._series.add(cat.OWNER_FETCHES, (), 0.0)
        self._collectors: list[Collector] = []

    def observe_admission(
        self, endpoint: str, verdict: str, outcome: str, seconds: float, reason: str = ""
    ) -> None:
        """Record one answered AdmissionReview (or one refused request)."""
        self._series.observe(
            cat.ADMISSION_DURATION, seconds, (("endpoint", endpoint), ("verdict", verdict)))
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

    def count_owner_fetch(self) -> None:
        self._series.add(cat.OWNER_FETCHES)

    def add_collector(self, collector: Collector) -> None:
        """Extra samples computed at scrape time (e.g. by the gang controller)."""
        with self._lock:
            self._collectors.append(collector)

    def render(self) -> str:
        with self._lock:
            collectors = list(self._collectors)
        samples = self._series.samples()
        for collector in collectors:
            try:
                samples.update(checked(collector()))
            except Exception:  # a broken collector must not take /metrics down
                continue
        return render(samples)
