"""The controller's numbers for /metrics: gauges computed from its last plan and its
watchdog, beside the counters and summaries its `Series` keeps.

`samples_of(...)` gives labelled samples ({(name, labels): value}, what the server's
metrics endpoint renders); `flattened(samples)` the same summed to {name: value} for
`gangkeeper status`-style readers and tests.

Pure: values in, dicts out. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.catalogue import Metric
from gangkeeper.policies.release.results import Plan

from ..series import Sample, Series
from .timings import queue_samples


def samples_of(
    plan: Plan,
    *,
    leader: bool,
    synced: bool,
    watchdog: Mapping[Metric, float],
    relists: Mapping[str, int],
    series: Series,
) -> dict[Sample, float]:
    """Every sample the controller exposes; gauges of gangs by state and wait reason
    start at zero, so a series never disappears when its last gang goes."""
    samples: dict[Sample, float] = {
        (cat.CONTROLLER_LEADER.name, ()): 1.0 if leader else 0.0,
        (cat.CONTROLLER_SYNCED.name, ()): 1.0 if synced else 0.0,
    }
    for state in ("waiting", "releasing", "released"):
        samples[(cat.GANGS.name, (("state", state),))] = 0.0
    for code in cat.WAIT_REASONS:
        samples[(cat.GANGS_WAITING.name, (("reason", code),))] = 0.0
    stuck = 0.0
    for report in plan.reports:
        samples[(cat.GANGS.name, (("state", report.state),))] += 1
        if report.state == "waiting":
            key: Sample = (cat.GANGS_WAITING.name, (("reason", report.code),))
            samples[key] = samples.get(key, 0.0) + 1
        stuck += 1 if report.stuck else 0
    samples[(cat.GANGS_STUCK.name, ())] = stuck
    samples.update(queue_samples(plan.reports))
    for family, value in watchdog.items():
        samples[(family.name, ())] = value
    for resource, count in relists.items():
        samples[(cat.CONTROLLER_RELISTS.name, (("resource", resource),))] = float(count)
    samples.update(series.samples())
    return samples


def flattened(samples: Mapping[Sample, float]) -> dict[str, float]:
    """{name: value}, labelled series summed: `gangkeeper_gangs` by state becomes
    `gangkeeper_gangs_<state>`; the per-reason split of waiting gangs is left out (its
    sum is `gangkeeper_gangs_waiting`), and so are the per-gang queue positions (a sum
    of positions means nothing)."""
    flat: dict[str, float] = {}
    for (name, labels), value in samples.items():
        if (name == cat.GANGS_WAITING.name and labels) or name == cat.GANG_QUEUE_POSITION.name:
            continue
        key = f"{cat.GANGS.name}_{labels[0][1]}" if name == cat.GANGS.name else name
        flat[key] = flat.get(key, 0.0) + value
    return flat
