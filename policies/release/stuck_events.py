"""Which stuck gangs get an Event this pass (`GangStuck...`, one reason per wait code).

A gang that has waited longer than `gangTimeoutSeconds` (`GangReport.stuck`) gets a
Warning on its owner and first members — again when its cause or its number of
members changes (a member created after the first report gets one, and the note says
the new count), not on every pass: numbers of free GPUs in a reason would make a
storm. What the last Event said is the controller's memory (`Evented`), passed in and
returned, forgotten for gangs that are gone so it stays bounded by the live gangs.

Pure: reports, `PodInfo`s and the memory in, Events and the memory after out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .. import catalogue as cat
from ..cluster.observed_gangs import PodInfo
from ..settings.config import Config
from .gang_events import Counted, Event, event_targets
from .results import GangReport

#: Gang instance (namespace, label, arrival) → (cause, members present) of its last
#: stuck Event.
Evented = Mapping[tuple[str, str, float], tuple[str, int]]


def stuck_events(
    reports: Iterable[GangReport], pods: Iterable[PodInfo], evented: Evented, config: Config
) -> tuple[list[Event], list[Counted], dict[tuple[str, str, float], tuple[str, int]]]:
    """The Events of this pass's stuck gangs, what they count, and the memory after."""
    reports = list(reports)
    live = {(r.namespace, r.label, r.arrived) for r in reports}
    after = {k: v for k, v in evented.items() if k in live}
    events: list[Event] = []
    counts: list[Counted] = []
    pods_by_gang: dict[tuple[str, str], list[PodInfo]] | None = None
    for report in reports:
        if not report.stuck:
            continue
        key = (report.namespace, report.label, report.arrived)
        said = (report.code, report.present)
        if after.get(key) == said:
            continue
        after[key] = said
        if pods_by_gang is None:  # only once some gang is reported
            pods_by_gang = {}
            for pod in pods:
                if pod.gang:
                    pods_by_gang.setdefault((pod.namespace, pod.gang), []).append(pod)
        members = pods_by_gang.get((report.namespace, report.label), [])
        owner = next((m.owner for m in members if m.owner is not None), None)
        note = (
            f"gang {report.namespace}/{report.name} waiting "
            f"{int(report.age_seconds)}s (timeout {config.gang_timeout_seconds}s): "
            f"{report.reason}"
        )
        events.append(Event(event_targets(report.namespace, owner, members),
                            cat.WAIT_REASONS[report.code], note))
        counts.append((cat.GANG_STUCK_REPORTS, (("reason", report.code),), 1.0))
    return events, counts, after
