"""The report: machine facts, Markdown tables, JSON and the scheduling plot."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from bench.report import (
    BenchResult,
    cpu_model,
    format_value,
    machine,
    markdown,
    plot_scheduling,
    table,
    write_json,
)

X86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n"
ARM = "processor\t: 0\nBogoMIPS\t: 50.00\nHardware\t: BCM2835\n"


@pytest.mark.parametrize(
    ("cpuinfo", "model"), [(X86, "AMD EPYC 7B13"), (ARM, "BCM2835"), ("", "unknown")]
)
def test_cpu_model_is_read_from_cpuinfo_text(cpuinfo: str, model: str) -> None:
    assert cpu_model(cpuinfo) == model


def test_machine_names_date_cores_and_cpu() -> None:
    info = machine(dt.datetime(2026, 11, 30, 1, 2, tzinfo=dt.UTC))
    assert info["date"] == "2026-11-30 01:02 UTC"
    assert info["cores"] >= 1
    assert info["cpu"]


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "—"), (True, "yes"), (False, "no"), (0.0, "0"), (1234.6, "1235"),
     (12.5, "12.5"), (3.0, "3"), (0.01234, "0.0123"), (7, "7"), ("a|b", "a\\|b")],
)  # fmt: skip
def test_cells_are_short_and_never_break_the_table(value: Any, text: str) -> None:
    assert format_value(value) == text


def test_table_has_the_scalar_columns_of_all_rows_in_first_seen_order() -> None:
    rows = [{"mode": "none", "idle": 1.5, "series": {"x": [1]}}, {"mode": "gate", "met": True}]
    lines = table(rows).splitlines()
    assert lines[0] == "| mode | idle | met |"
    assert lines[2] == "| none | 1.5 | — |"
    assert lines[3] == "| gate | — | yes |"


def _result(name: str, status: str = "ok", rows: list[dict[str, Any]] | None = None) -> BenchResult:
    return BenchResult(name=name, status=status, seconds=3.0, rows=rows or [],  # type: ignore[typeddict-item]
                       error="" if status == "ok" else "boom: it broke")  # fmt: skip


SCHED_ROWS: list[dict[str, Any]] = [
    {"mode": "none", "title": "no gang scheduling", "status": "measured", "jobs": 2,
     "completed": 1, "deadlocked": 1, "idle_gpu_s": 300.0, "makespan_s": None,
     "makespan_vs_best": None, "horizon_s": 20.0,
     "series": {"partial_gpus": [[0, 0], [2, 16]], "completed": [[0, 0], [5, 1]]}},
    {"mode": "gate", "title": "gangkeeper gate", "status": "measured", "jobs": 2,
     "completed": 2, "deadlocked": 0, "idle_gpu_s": 0.0, "makespan_s": 12.0,
     "makespan_vs_best": 1.0, "horizon_s": 20.0,
     "series": {"partial_gpus": [[0, 0]], "completed": [[0, 0], [6, 1], [12, 2]]}},
    {"mode": "coscheduling", "title": "coscheduling", "status": "not measurable: no scheduler"},
]  # fmt: skip


def test_markdown_names_the_command_the_machine_and_every_failure() -> None:
    info = machine()
    text = markdown(
        [_result("policy", "missing"), _result("scheduling", rows=SCHED_ROWS)],
        info,
        "python -m bench --quick",
    )
    assert "`python -m bench --quick`" in text
    assert info["cpu"] in text
    assert "**missing**" in text and "boom: it broke" in text
    # The headline compares gangkeeper with the no-gang baseline of the same run.
    assert "0.0 idle GPU-seconds in partial gangs vs 300.0 without gang scheduling" in text
    assert "2/2 vs 1/2 jobs completed" in text


def test_json_holds_the_raw_rows_including_series(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "results.json"
    write_json(path, [_result("scheduling", rows=SCHED_ROWS)], machine(), "python -m bench")
    data = json.loads(path.read_text())
    assert data["command"] == "python -m bench"
    assert data["results"][0]["rows"][0]["series"]["partial_gpus"] == [[0, 0], [2, 16]]


def test_the_scheduling_plot_is_a_png(tmp_path: Path) -> None:
    path = plot_scheduling(SCHED_ROWS, tmp_path / "scheduling.png")
    assert path is not None
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 1000


def test_no_plot_when_nothing_was_measured(tmp_path: Path) -> None:
    assert plot_scheduling(SCHED_ROWS[2:], tmp_path / "x.png") is None
    assert not (tmp_path / "x.png").exists()
