"""`python -m bench.preemption`: its record per fleet size, and the exit code that guards
the figures (an arrival never bound, or a gang seen partly bound, fails the run)."""

from __future__ import annotations

import json

import pytest

from bench import preemption
from gangkeeper.policies.release.results import Plan

KEYS = {"nodes", "gpus", "arrivals", "passes_p50", "passes_p99", "decide_ms_p50",
        "decide_ms_p99", "preempted_over_needed", "preempted_over_needed_max", "lost_gpu_s",
        "partly_bound_max", "all_bound"}


def test_every_arrival_preempts_what_it_needs_and_binds_whole(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert preemption.main(["--nodes", "8", "--arrivals", "4", "-o", "json"]) == 0
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert set(record) == KEYS
    assert record["all_bound"] and record["partly_bound_max"] == 0
    # The fleet starts full, so the first arrival preempts: one pass chooses the
    # victims, the next releases onto their room.
    assert record["passes_p99"] == 2
    # Never fewer GPUs than the least that could make room, and here exactly those.
    assert record["preempted_over_needed"] == record["preempted_over_needed_max"] == 1.0
    assert record["lost_gpu_s"] > 0


def test_a_gang_that_never_binds_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def releases_nothing(self: preemption.Cluster, result: Plan, now: float) -> tuple[int, float]:
        return 0, 0.0  # nothing the plan asks for is done

    monkeypatch.setattr(preemption.Cluster, "act", releases_nothing)
    assert preemption.main(["--nodes", "4", "--arrivals", "1"]) == 1
