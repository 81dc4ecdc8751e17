"""Series of the metrics `gangkeeper.policies.catalogue` declares, and their text
exposition (Prometheus 0.0.4).

`Series` is the one place a process keeps counters, gauges, summaries and histograms: the
admission server (`server.metrics`) and the gang controller each own one and write to
it by catalogued `Metric`, never by a name spelt out, so a sample of an undeclared
metric, of the wrong type or with other label names is refused where it is written
(ValueError naming the metric) rather than exposed. `render` writes any samples
({(series name, labels): value}) as families with the catalogue's type and help.

Written by hand on purpose: a handful of families do not justify a dependency.
Updates take a lock (the event loop, watch threads and the controller's workers write;
a scrape reads a copy). Pure bookkeeping: no I/O.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable, Mapping
from typing import Protocol

from gangkeeper.policies.catalogue import Metric, MetricType, metric

Labels = tuple[tuple[str, str], ...]
#: One series: (series name, labels), e.g. ("gangkeeper_gang_releases_total",
#: (("backend", "gate"),)); a histogram's have `_bucket`/`_sum`/`_count` names.
Sample = tuple[str, Labels]



class Count(Protocol):
    """What a writer is given to count with: a `Series.add` (a counter, its labels)."""

    def __call__(self, family: Metric, labels: Labels = (), value: float = 1.0) -> None: ...


#: The series names of each kind of family, by suffix.
_SUFFIXES: dict[MetricType, tuple[str, ...]] = {
    "counter": ("",), "gauge": ("",), "summary": ("_sum", "_count"),
    "histogram": ("_bucket", "_sum", "_count"),
}


def check_labels(family: Metric, labels: Labels, extra: tuple[str, ...] = ()) -> None:
    """ValueError unless `labels` has the catalogued label names in order (+ `extra`)."""
    names = tuple(k for k, _ in labels)
    if names != (*family.labels, *extra):
        raise ValueError(
            f"metric {family.name}: labels {list(names)}, the catalogue declares "
            f"{list((*family.labels, *extra))}"
        )


def family_of(name: str) -> tuple[Metric, str]:
    """The catalogued family of a series name and the series' suffix; ValueError for a
    name no catalogued family has."""
    for suffix in ("", "_bucket", "_sum", "_count"):
        if suffix and not name.endswith(suffix):
            continue
        found = metric(name.removesuffix(suffix) if suffix else name)
        if found is not None and suffix in _SUFFIXES[found.type]:
            return found, suffix
    raise ValueError(f"series {name!r} is not of a metric in gangkeeper.policies.catalogue")


class Series:
    """Counters, gauges, summaries and histograms of catalogued metrics, under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[Sample, float] = {}

    def _write(self, family: Metric, kind: MetricType, labels: Labels) -> None:
        if metric(family.name) != family:
            raise ValueError(f"metric {family.name} is not in gangkeeper.policies.catalogue")
        if family.type != kind:
            raise ValueError(f"metric {family.name} is a {family.type}, not a {kind}")
        check_labels(family, labels)

    def add(self, family: Metric, labels: Labels = (), value: float = 1.0) -> None:
        """Add `value` to a counter."""
        self._write(family, "counter", labels)
        key = (family.name, labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + value

    def set(self, family: Metric, labels: Labels, value: float) -> None:
        """Set a gauge."""
        self._write(family, "gauge", labels)
        with self._lock:
            self._values[(family.name, labels)] = value

    def observe(self, family: Metric, value: float, labels: Labels = ()) -> None:
        """One observation of a summary (its `_sum` and `_count`) or of a histogram
        (and the cumulative `_bucket` of each catalogued bound ≥ `value`, and +Inf)."""
        self._write(family, "histogram" if family.type == "histogram" else "summary", labels)
        total, count = (f"{family.name}_sum", labels), (f"{family.name}_count", labels)
        with self._lock:
            if family.type == "histogram":
                bounds = (*family.buckets, math.inf)
                # bisect_left: a value equal to a bound belongs to that bucket (le = "≤").
                first = bisect.bisect_left(bounds, value)
                for i, bound in enumerate(bounds):
                    key = (f"{family.name}_bucket", (*labels, ("le", number(bound))))
                    self._values[key] = self._values.get(key, 0.0) + (1 if i >= first else 0)
            self._values[total] = self._values.get(total, 0.0) + value
            self._values[count] = self._values.get(count, 0.0) + 1

    def samples(self) -> dict[Sample, float]:
        """A copy of every series written so far."""
        with self._lock:
            return dict(self._values)


def checked(samples: Mapping[Sample, float]) -> Mapping[Sample, float]:
    """`samples` if every one is of a catalogued family with its labels (buckets with
    `le` last); ValueError naming the first that is not."""
    for name, labels in samples:
        family, suffix = family_of(name)
        check_labels(family, labels, ("le",) if suffix == "_bucket" else ())
    return samples


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return "{" + inner + "}" if inner else ""


def number(value: float) -> str:
    """A sample value (or bucket bound) as the exposition format writes it."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _order(sample: tuple[Sample, float]) -> tuple[Labels, int, float]:
    """Within a family: by labels (without `le`), then buckets by bound, sum, count."""
    (name, labels), _ = sample
    if name.endswith("_bucket"):
        bound = dict(labels)["le"]
        return labels[:-1], 0, math.inf if bound == "+Inf" else float(bound)
    return labels, 1 if name.endswith("_sum") else 2 if name.endswith("_count") else 0, 0.0


def render(samples: Mapping[Sample, float]) -> str:
    """The exposition of `samples` (every one of a catalogued family): a family with
    any series gets the catalogue's HELP and TYPE, its series in a stable order."""
    families: dict[Metric, list[tuple[Sample, float]]] = {}
    for sample, value in samples.items():
        families.setdefault(family_of(sample[0])[0], []).append((sample, value))
    out: list[str] = []
    for family in sorted(families, key=lambda f: f.name):
        out.append(f"# HELP {family.name} {family.help}")
        out.append(f"# TYPE {family.name} {family.type}")
        for (name, labels), value in sorted(families[family], key=_order):
            out.append(f"{name}{_labels(labels)} {number(value)}")
    return "\n".join(out) + "\n"
