"""`gangkeeper sandbox up --nodes N`: how long a sandbox of N kwok GPU nodes takes to
come up, and what `gangkeeper serve`, kwok and kube-apiserver hold once it is up.

Each size gets a fresh sandbox (all neighbours: kwok, JobSet, LeaderWorkerSet) in a
temporary directory; "up" is `Sandbox.up`'s own figure, from the first process start
until every node is Ready (kwok) and the API server calls gangkeeper's webhook. RSS is
read from /proc once it stops moving. Baseline: the same sandbox with no nodes, in the
same run.

Live only: starts and stops its own sandboxes, reads their processes' /proc status.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from bench.memory import process_memory_mb

PROCESSES = ("gangkeeper", "gangkeeper-controller", "kwok", "kube-apiserver")


def _settled(pid: int) -> float:
    last = process_memory_mb(pid)[0]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(2.0)
        now = process_memory_mb(pid)[0]
        if abs(now - last) <= 0.01 * last:
            return now
        last = now
    return last


def measure(nodes: int) -> dict[str, Any]:
    from gangkeeper.webhook.sandbox import Sandbox

    with tempfile.TemporaryDirectory(prefix="gangkeeper-scale-") as directory:
        sandbox = Sandbox(Path(directory))
        try:
            info = sandbox.up(fleet=None, node_count=nodes, timeout=900)
            row: dict[str, Any] = {"nodes": nodes, "up_s": round(info.startup_seconds, 1)}
            for name in PROCESSES:
                record = sandbox.processes.record(name)
                row[f"{name}_rss_mb"] = round(_settled(record.pid), 1) if record else None
            return row
        finally:
            sandbox.down()


def run(quick: bool) -> list[dict[str, Any]]:
    sizes = (0, 200) if quick else (0, 1000, 5000)
    rows = [measure(n) for n in sizes]
    base = rows[0]
    for row in rows:
        row["up_vs_empty"] = round(row["up_s"] / base["up_s"], 2) if base["up_s"] else None
    return rows


if __name__ == "__main__":  # pragma: no cover - manual entry point
    import sys

    from bench.report import print_rows

    print_rows("sandbox_scale", run("--quick" in sys.argv[1:]))
