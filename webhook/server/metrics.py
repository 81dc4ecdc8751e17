"""Prometheus metrics of the admission server, in the text exposition format (0.0.4).

Written by hand on purpose: a handful of counters, gauges and one histogram do not
justify a dependency. `Metrics` is updated from the event loop (requests) and from
watch threads (cache sync state), so every update takes a lock; rendering copies under
the same lock. Pure bookkeeping: no I/O, no HTTP (the app serves `render()`).

Exposed series:
    gangkeeper_admission_duration_seconds{endpoint,verdict}   histogram
    gangkeeper_admission_requests_total{endpoint,outcome}     counter
    gangkeeper_admission_rejections_total{endpoint,reason}    counter
    gangkeeper_admission_decisions_total{endpoint,verdict,reason}  counter
    gangkeeper_cache_synced{resource}                         gauge 0/1
    gangkeeper_certificate_expiry_timestamp_seconds           gauge (unix time)
    gangkeeper_certificate_reloads_total                      counter
plus whatever numeric values extra collectors return (e.g. the gang controller's);
a collector's family with `NAME_bucket` series (label `le`) and `NAME_sum`/`NAME_count`
is rendered as one histogram `NAME`.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

#: Admission latency buckets (seconds): the API server's webhook timeout is 5 s and
#: interesting latencies are well under 10 ms.
DURATION_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)

#: A collector returns samples as {(metric name, ((label, value), ...)): number}.
Sample = tuple[str, tuple[tuple[str, str], ...]]
Collector = Callable[[], Mapping[Sample, float]]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return "{" + inner + "}" if inner else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


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
        self._requests: dict[tuple[str, str], int] = {}
        self._rejections: dict[tuple[str, str], int] = {}
        self._decisions: dict[tuple[str, str, str], int] = {}
        self._synced: dict[str, bool] = {}
        self._cert_expiry: float | None = None
        self._cert_reloads = 0
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
            key = (endpoint, outcome)
            self._requests[key] = self._requests.get(key, 0) + 1
            if reason:
                rkey = (endpoint, reason)
                self._rejections[rkey] = self._rejections.get(rkey, 0) + 1
            # Kueue-style: every decision by verdict, with the rejection reason or,
            # for an admitted object, what was done with it.
            dkey = (endpoint, verdict, reason or outcome)
            self._decisions[dkey] = self._decisions.get(dkey, 0) + 1

    def set_synced(self, resource: str, synced: bool) -> None:
        with self._lock:
            self._synced[resource] = synced

    def set_certificate_expiry(self, unix_seconds: float) -> None:
        with self._lock:
            self._cert_expiry = unix_seconds

    def count_certificate_reload(self) -> None:
        with self._lock:
            self._cert_reloads += 1

    def add_collector(self, collector: Collector) -> None:
        """Extra samples computed at scrape time (e.g. by the gang controller)."""
        with self._lock:
            self._collectors.append(collector)

    def render(self) -> str:
        with self._lock:
            durations = {k: (list(h.counts), h.total) for k, h in self._durations.items()}
            requests = dict(self._requests)
            rejections = dict(self._rejections)
            decisions = dict(self._decisions)
            synced = dict(self._synced)
            expiry = self._cert_expiry
            reloads = self._cert_reloads
            collectors = list(self._collectors)
        out: list[str] = []
        name = "gangkeeper_admission_duration_seconds"
        out.append(f"# HELP {name} Time to answer an AdmissionReview.")
        out.append(f"# TYPE {name} histogram")
        for (endpoint, verdict), (counts, total) in sorted(durations.items()):
            base = (("endpoint", endpoint), ("verdict", verdict))
            running = 0
            for bound, count in zip((*DURATION_BUCKETS, math.inf), counts, strict=True):
                running += count
                out.append(f"{name}_bucket{_labels((*base, ('le', _number(bound))))} {running}")
            out.append(f"{name}_sum{_labels(base)} {_number(total)}")
            out.append(f"{name}_count{_labels(base)} {running}")
        self._family(
            out, "gangkeeper_admission_requests_total", "counter",
            "AdmissionReviews and refused requests by outcome.",
            {(("endpoint", e), ("outcome", o)): float(n) for (e, o), n in requests.items()},
        )
        self._family(
            out, "gangkeeper_admission_rejections_total", "counter",
            "Denied admissions by reason code.",
            {(("endpoint", e), ("reason", r)): float(n) for (e, r), n in rejections.items()},
        )
        self._family(
            out, "gangkeeper_admission_decisions_total", "counter",
            "Admission decisions by verdict and reason (or outcome when admitted).",
            {
                (("endpoint", e), ("verdict", v), ("reason", r)): float(n)
                for (e, v, r), n in decisions.items()
            },
        )
        self._family(
            out, "gangkeeper_cache_synced", "gauge",
            "1 when the watch cache of a resource has listed at least once.",
            {(("resource", r),): float(s) for r, s in synced.items()},
        )
        if expiry is not None:
            self._family(
                out, "gangkeeper_certificate_expiry_timestamp_seconds", "gauge",
                "notAfter of the serving certificate, as a unix timestamp.", {(): expiry},
            )
        self._family(
            out, "gangkeeper_certificate_reloads_total", "counter",
            "Serving certificates loaded after a change on disk.", {(): float(reloads)},
        )
        extra: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        for collector in collectors:
            try:
                samples = collector()
            except Exception:  # a broken collector must not take /metrics down
                continue
            for (metric, labels), value in samples.items():
                extra.setdefault(metric, {})[labels] = value
        histograms = {
            m.removesuffix("_bucket")
            for m in extra
            if m.endswith("_bucket") and m.removesuffix("_bucket") + "_count" in extra
        }
        for metric, family in sorted(extra.items()):
            histogram = next(
                (h for h in histograms if metric in (f"{h}_bucket", f"{h}_sum", f"{h}_count")),
                None,
            )
            if histogram is not None:
                if metric == f"{histogram}_bucket":
                    out.append(f"# TYPE {histogram} histogram")
                    # In the collector's order: its buckets come in increasing `le`.
                    for series in ("_bucket", "_sum", "_count"):
                        for labels, value in extra[histogram + series].items():
                            out.append(f"{histogram}{series}{_labels(labels)} {_number(value)}")
                continue
            kind = "counter" if metric.endswith("_total") else "gauge"
            self._family(out, metric, kind, "", family)
        return "\n".join(out) + "\n"

    @staticmethod
    def _family(
        out: list[str],
        name: str,
        kind: str,
        help_text: str,
        samples: Mapping[tuple[tuple[str, str], ...], float],
    ) -> None:
        if help_text:
            out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        for labels, value in sorted(samples.items()):
            out.append(f"{name}{_labels(labels)} {_number(value)}")
