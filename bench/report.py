"""Turning benchmark results into a Markdown report, a JSON file and PNG plots.

A result is a `BenchResult` per benchmark: its status (`ok`, `failed`, `missing`), how
long it took, and its rows (plain dicts). Tables show a row's scalar values; nested
values (time series, trace parameters) go to the JSON only, except the scheduling
series, which are plotted.

May read /proc/cpuinfo and platform facts, and write only the files it is given.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict

Status = Literal["ok", "failed", "missing"]


class BenchResult(TypedDict):
    name: str
    status: Status
    seconds: float
    rows: list[dict[str, Any]]
    error: str


def cpu_model(cpuinfo: str) -> str:
    """The CPU model from /proc/cpuinfo text ('model name', or 'Hardware'/'cpu model')."""
    for key in ("model name", "Hardware", "cpu model", "Processor"):
        for line in cpuinfo.splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == key and value.strip():
                return value.strip()
    return "unknown"


def machine(now: dt.datetime | None = None) -> dict[str, Any]:
    """What the figures were measured on: they only compare within one run and machine."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    when = now or dt.datetime.now(dt.UTC)
    return {
        "date": when.strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count() or 0,
        "cpu": cpu_model(cpuinfo),
        "python": platform.python_version(),
        "kernel": platform.release(),
        # Other work on a shared machine moves every absolute figure; say how busy it was.
        "load_1m": round(os.getloadavg()[0], 2),
    }


def format_value(value: Any) -> str:
    """Table cell text: None as a dash, floats without noise, bools as yes/no."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}".rstrip("0").rstrip(".")
        return f"{value:.3g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table over the scalar columns of the rows, in first-seen order."""
    columns: list[str] = []
    for row in rows:
        for key, value in row.items():
            if key not in columns and _scalar(value):
                columns.append(key)
    if not columns:
        return "_(no rows)_"
    lines = [
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
    ]
    for row in rows:
        cells = [format_value(row.get(c)) if _scalar(row.get(c)) else "…" for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def headline(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Plain sentences comparing each gang mode with no gang scheduling, same run."""
    by_mode = {r.get("mode"): r for r in rows if r.get("status") == "measured"}
    base = by_mode.get("none")
    if base is None:
        return []
    out = []
    for mode, row in by_mode.items():
        if mode == "none":
            continue
        out.append(
            f"- **{row.get('title', mode)}**: {row['idle_gpu_s']} idle GPU-seconds in partial "
            f"gangs vs {base['idle_gpu_s']} without gang scheduling; "
            f"{row['deadlocked']} vs {base['deadlocked']} gangs deadlocked; "
            f"{row['completed']}/{row['jobs']} vs {base['completed']}/{base['jobs']} jobs "
            f"completed; makespan {format_value(row.get('makespan_s'))} s "
            f"({format_value(row.get('makespan_vs_best'))} x best)."
        )
    return out


def markdown(
    results: Sequence[BenchResult],
    machine_info: Mapping[str, Any],
    command: str,
    plots: Sequence[Path] = (),
) -> str:
    parts = [
        "# gangkeeper benchmarks",
        "",
        f"`{command}` — {machine_info['date']}, {machine_info['cores']} cores, "
        f"{machine_info['cpu']}, Python {machine_info['python']}, Linux {machine_info['kernel']}, "
        f"load average {machine_info.get('load_1m', '?')} at the start.",
        "Absolute times drift on shared machines; compare within one run (ratios, counts).",
    ]
    for result in results:
        parts += ["", f"## {result['name']}", ""]
        if result["status"] != "ok":
            parts.append(
                f"**{result['status']}** after {result['seconds']:.0f} s: {result['error']}"
            )
            continue
        if result["name"] == "scheduling":
            parts += [*headline(result["rows"]), ""]
        parts.append(table(result["rows"]))
        parts.append(f"\n_{result['seconds']:.0f} s_")
    if plots:
        parts += ["", "## Plots", ""]
        parts += [f"- `{p}`" for p in plots]
    return "\n".join(parts) + "\n"


def write_json(
    path: Path, results: Sequence[BenchResult], machine_info: Mapping[str, Any], command: str
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"command": command, "machine": dict(machine_info), "results": list(results)}
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")


def plot_scheduling(rows: Sequence[Mapping[str, Any]], path: Path) -> Path | None:
    """GPUs held by partial gangs, and jobs completed, over time per mode: one PNG.

    Returns None when no mode has series to draw (nothing was measured).
    """
    measured = [r for r in rows if isinstance(r.get("series"), Mapping)]
    if not measured:
        return None
    import matplotlib

    matplotlib.use("Agg")  # files only; never a display
    import matplotlib.pyplot as plt

    fig, (held, done) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for row in measured:
        series = row["series"]
        horizon = float(row.get("horizon_s") or 0)
        label = str(row.get("title") or row.get("mode"))
        for axis, key in ((held, "partial_gpus"), (done, "completed")):
            points = [(float(t), float(v)) for t, v in series.get(key, [])]
            if not points:
                continue
            if horizon > points[-1][0]:
                points.append((horizon, points[-1][1]))  # hold the last value to the end
            xs, ys = zip(*points, strict=True)
            axis.step(xs, ys, where="post", label=label)
    held.set_ylabel("GPUs held by partial gangs")
    held.set_title("Idle GPUs: bound pods of gangs not yet complete")
    done.set_ylabel("jobs completed")
    done.set_xlabel("seconds since the trace started (time-compressed)")
    for axis in (held, done):
        axis.grid(alpha=0.3)
        axis.legend(loc="best", fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def print_rows(name: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """What `python -m bench.<name>` prints: the rows as one Markdown table."""
    sys.stdout.write(f"## {name}\n\n{table(rows)}\n")
