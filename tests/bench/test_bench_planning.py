"""`python -m bench.planning`: its records, and the exit code that guards the figures."""

from __future__ import annotations

import json

import pytest

from bench import planning

KEYS = {"size", "gangs", "pods", "nodes", "state", "cpu_s", "full_cpu_s", "matches_full_plan",
        "releases", "waiting", "first_pass_cpu_s", "one_change_cpu_s", "reused",
        "first_release_s", "median_release_s", "release_pass_s"}


def test_json_output_is_one_record_per_state_and_the_plans_match(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert planning.main(["--sizes", "20", "-o", "json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["state"] for r in records] == ["burst", "inflight", "settled"]
    assert all(set(r) == KEYS and r["matches_full_plan"] for r in records)
    burst, inflight, settled = records
    # 20 gangs of 2-20 one-GPU members on 20 x 8 GPUs: some fit, the rest wait.
    assert burst["releases"] > 0 and burst["waiting"] > 0
    assert inflight["releases"] == settled["releases"] == 0
    assert settled["waiting"] == burst["waiting"]
    # Nothing changed after the settled state's first pass: the passes after it are
    # that plan re-used; burst and in-flight passes are planned.
    assert (burst["reused"], inflight["reused"], settled["reused"]) == (False, False, True)
    # The burst's releases are told as decided: the first long before the pass ends.
    first, median, whole = (burst[k] for k in ("first_release_s", "median_release_s",
                                               "release_pass_s"))
    assert 0 < first <= median < whole
    assert inflight["first_release_s"] is None
    # Every state is also planned a pass after one gang's change (timed, not compared
    # here: at 20 gangs the figures are a few milliseconds).
    assert all(r["one_change_cpu_s"] > 0 for r in records)


def test_a_pass_that_decides_otherwise_than_from_scratch_fails_the_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = planning.decisions
    calls = iter(range(1_000))

    def differs_once(result: planning.Plan) -> tuple[object, ...]:
        # The first pass of the planner decides something a fresh plan does not.
        return (next(calls),) if len(result.releases) else real(result)

    monkeypatch.setattr(planning, "decisions", differs_once)
    assert planning.main(["--sizes", "20"]) == 1
    assert "| NO |" in capsys.readouterr().out
