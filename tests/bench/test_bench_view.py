"""`gangkeeper view`'s render benchmark runs inside `python -m bench` (issue 28: "render
time of each page at 1,000 gangs / 5,000 nodes in the benchmarks"): its `--quick` form
gives a row per page with a time. The figures are not judged (shared machine)."""

from __future__ import annotations

import bench.view
from bench.__main__ import BENCHMARKS

PAGES = {"snapshot (plan + queue + fleet)", "queue page", "queue page, one namespace waiting",
         "gang page, first (runs explain)", "gang page, again",
         "fleet page (one row per shape)", "fleet page (every node)", "/api/state JSON"}


def test_the_view_benchmark_is_one_of_the_benchmarks_bench_runs() -> None:
    assert ("view", "bench.view", False) in BENCHMARKS


def test_its_quick_run_times_every_page_at_its_size() -> None:
    rows = bench.view.run(quick=True)
    assert {r["page"] for r in rows} == PAGES
    for row in rows:
        assert row["ms"] > 0 and (row["gangs"], row["nodes"]) == (100, 500), row
