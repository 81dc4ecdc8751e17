"""`gangkeeper status` computed from plain objects: which gangs wait, and why.

`gang_status(pods, nodes, config, now)` runs the controller's own plan over raw Pod
and Node dicts (as listed from the API), so the status shows exactly what the
controller would decide. `render_text` / `render_json` format the reports.

Pure: dicts in, strings out; the command does the listing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..autoscaling.provisioning import request_info
from ..cluster.observed_gangs import is_live, pod_info
from ..settings.config import Config
from .budgets import read_budgets
from .plan import plan
from .results import GangReport


def gang_status(
    pods: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    config: Config,
    now: float,
    namespace: str | None = None,
    *,
    requests: Iterable[Mapping[str, Any]] | None = None,
    budgets: Iterable[Mapping[str, Any]] = (),
) -> list[GangReport]:
    """Reports for every gang (or those of `namespace`), oldest first.

    Every pod of the cluster is needed, not only those of `namespace`: pods elsewhere
    use the GPUs a gang is waiting for. `requests`: the ProvisioningRequest dicts
    (None where not served or not asked for); `budgets`: the PodDisruptionBudget dicts.
    """
    infos = [pod_info(p, config) for p in pods if is_live(p)]
    asked = None if requests is None else [i for r in requests if (i := request_info(r))]
    reports = plan(infos, nodes, config, now, requests=asked,
                   budgets=read_budgets(budgets)).reports
    return [r for r in reports if namespace is None or r.namespace == namespace]


#: Members whose node the text table lists per gang (JSON lists all).
_SHOWN = 8


def age(seconds: float) -> str:
    """A wait as `status` prints it: seconds, then minutes, then hours."""
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def _members(report: GangReport) -> str:
    needed = "?" if report.min_member is None else str(report.min_member)
    return f"{report.present}/{needed}"


def queue(report: GangReport) -> str:
    """A waiting gang's place in its queue as `status` prints it: "2/5" (2nd of the 5
    gangs waiting for nodes it may use), "-" for a gang in none (`queue.places`)."""
    if report.queue_position is None:
        return "-"
    return f"{report.queue_position}/{report.queue_length}"


def render_text(reports: Sequence[GangReport]) -> str:
    """A kubectl-like table; QUEUE is a waiting gang's place among the gangs waiting for
    nodes it may use, WHY says what each waiting gang waits for, and a line under a gang
    with members bound or pinned says where they go (member → node)."""
    if not reports:
        return "No gangs found.\n"
    header = (
        "NAMESPACE", "GANG", "BACKEND", "MEMBERS", "GATED", "BOUND", "STATE", "QUEUE", "AGE",
        "WHY",
    )
    rows = [
        (
            r.namespace,
            r.name,
            r.backend,
            _members(r),
            str(r.gated),
            str(r.bound),
            "stuck" if r.stuck else r.state,
            queue(r),
            age(r.age_seconds),
            r.reason,
        )
        for r in reports
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
    lines = []
    for row, report in zip((header, *rows), (None, *reports), strict=True):
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
        if report is not None and report.assignment:
            lines.append(f"  nodes: {_assignment(report)}")
    return "\n".join(lines) + "\n"


def _assignment(report: GangReport) -> str:
    """Member → node of a released gang, the first `_SHOWN` members by name."""
    pairs = sorted(report.assignment)
    text = ", ".join(f"{pod} → {node}" for pod, node in pairs[:_SHOWN])
    return text + (f", … ({len(pairs) - _SHOWN} more)" if len(pairs) > _SHOWN else "")


def render_json(reports: Sequence[GangReport]) -> str:
    """A JSON array, one object per gang (keys as in `GangReport.as_dict`)."""
    return json.dumps([r.as_dict() for r in reports], indent=2) + "\n"
