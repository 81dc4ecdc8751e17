"""`bench.topology`: the rows it reports are of right answers (packed into no more racks
than the assignment over every node), for every case of the quick run."""

from __future__ import annotations

from bench import topology


def test_the_quick_run_reports_every_case_with_no_more_racks_than_the_baseline() -> None:
    rows = topology.run(quick=True)
    assert [r["case"] for r in rows] == [
        f"{racks} racks x {per} nodes, {count} x 8 GPUs"
        for racks, per, count in topology.QUICK_CASES
    ]
    for row in rows:
        assert row["racks_fewest"] <= row["racks_all"], row
        assert row["fewest_domains_ms"] > 0 and row["assign_all_ms"] > 0
