"""Scheduling figures computed from synthetic event logs, checked by hand arithmetic."""

from __future__ import annotations

import pytest

from bench.scheduling import Event, Outcome, TraceJob, outcome, percentile, summary_rows


def job(
    name: str, members: int, per: int = 1, arrival: float = 0.0, duration: float = 5.0
) -> TraceJob:
    return TraceJob(name, arrival, members, per, duration)


def binds(name: str, times: list[float], gpus: int = 1) -> list[Event]:
    return [Event(t, "bind", name, f"{name}-{i}", gpus) for i, t in enumerate(times)]


def test_a_gang_that_binds_member_by_member_wastes_the_gpus_held_before_the_last() -> None:
    jobs = [job("a", 4)]
    events = [Event(0.0, "arrive", "a"), *binds("a", [1.0, 2.0, 3.0, 4.0]),
              Event(9.0, "finish", "a")]  # fmt: skip
    o = outcome(jobs, events, horizon=20.0)
    # 1 GPU idle for 1 s, then 2 for 1 s, then 3 for 1 s; none once all 4 are bound.
    assert o.idle_gpu_seconds == pytest.approx(6.0)
    assert o.wait_mean == pytest.approx(4.0)
    assert (o.completed, o.deadlocked, o.makespan) == (1, 0, 9.0)
    # Partly bound from the first bind (1 s) to the last (4 s).
    assert o.spread_max == pytest.approx(3.0)


def test_a_gang_bound_all_at_once_wastes_nothing() -> None:
    jobs = [job("a", 8, per=2)]
    events = [Event(0.0, "arrive", "a"), *binds("a", [2.5] * 8, gpus=2), Event(7.5, "finish", "a")]
    o = outcome(jobs, events, horizon=10.0)
    assert o.idle_gpu_seconds == 0
    assert o.started == 1


def test_two_half_bound_gangs_deadlock_and_hold_their_gpus_to_the_horizon() -> None:
    jobs = [job("a", 4, per=8), job("b", 4, per=8)]
    events = [
        Event(0.0, "arrive", "a"), Event(0.0, "arrive", "b"),
        *binds("a", [1.0, 1.0], gpus=8), *binds("b", [1.0, 1.0], gpus=8),
    ]  # fmt: skip
    o = outcome(jobs, events, horizon=11.0)
    assert o.deadlocked == 2
    assert o.completed == 0
    assert o.makespan is None
    assert o.idle_gpu_seconds == pytest.approx(32 * 10.0)
    assert o.idle_share == pytest.approx(32 * 10.0 / (64 * 11.0))
    assert o.wait_mean is None and o.wait_p95 is None


def test_the_teardown_of_a_finished_gang_is_not_waste() -> None:
    jobs = [job("a", 2)]
    events = [
        Event(0.0, "arrive", "a"), *binds("a", [1.0, 1.0]),
        Event(6.0, "release", "a", "a-0", 1), Event(6.0, "finish", "a"),
        Event(8.0, "release", "a", "a-1", 1),
    ]  # fmt: skip
    assert outcome(jobs, events, horizon=10.0).idle_gpu_seconds == 0


def test_a_repeated_bind_from_the_watch_counts_once() -> None:
    jobs = [job("a", 3)]
    events = [Event(0.0, "arrive", "a"), *binds("a", [1.0]), *binds("a", [2.0])]
    # a-0 bound at 1 and "again" at 2: still one GPU, held from 1 to the horizon 5.
    assert outcome(jobs, events, horizon=5.0).idle_gpu_seconds == pytest.approx(4.0)


def test_a_member_deleted_before_the_gang_completed_stops_counting() -> None:
    jobs = [job("a", 3)]
    events = [
        Event(0.0, "arrive", "a"), *binds("a", [1.0, 1.0], gpus=2),
        Event(3.0, "release", "a", "a-0", 2), Event(3.0, "release", "a", "a-1", 2),
    ]  # fmt: skip
    assert outcome(jobs, events, horizon=10.0).idle_gpu_seconds == pytest.approx(8.0)


def test_events_after_the_horizon_are_ignored() -> None:
    jobs = [job("a", 1)]
    events = [Event(0.0, "arrive", "a"), *binds("a", [1.0]), Event(30.0, "finish", "a")]
    o = outcome(jobs, events, horizon=10.0)
    assert (o.completed, o.deadlocked) == (0, 1)


def test_events_in_any_order_give_the_same_figures() -> None:
    jobs = [job("a", 2), job("b", 1, arrival=1.0)]
    events = [Event(0.0, "arrive", "a"), Event(1.0, "arrive", "b"), *binds("a", [0.5, 2.0]),
              *binds("b", [1.5]), Event(4.0, "finish", "b"), Event(7.0, "finish", "a")]  # fmt: skip
    assert outcome(jobs, events, 10.0) == outcome(jobs, list(reversed(events)), 10.0)


def test_makespan_waits_and_completed_series_over_several_jobs() -> None:
    jobs = [job("a", 1), job("b", 1, arrival=2.0), job("c", 2, arrival=3.0)]
    events = [
        Event(0.0, "arrive", "a"), *binds("a", [1.0]), Event(2.0, "arrive", "b"),
        Event(3.0, "arrive", "c"), *binds("b", [5.0]), *binds("c", [4.0, 6.0]),
        Event(6.0, "finish", "a"), Event(10.0, "finish", "b"), Event(11.0, "finish", "c"),
    ]  # fmt: skip
    o = outcome(jobs, events, horizon=20.0)
    waits = [1.0, 3.0, 3.0]
    assert o.wait_mean == pytest.approx(sum(waits) / 3)
    assert o.wait_p95 == 3.0
    assert o.makespan == 11.0
    assert o.completed_series == ((0.0, 0), (6.0, 1), (10.0, 2), (11.0, 3))
    # c held one GPU alone from 4 to 6.
    assert o.partial_series == ((0.0, 0), (4.0, 1), (6.0, 0))
    assert o.idle_gpu_seconds == pytest.approx(2.0)


def test_an_event_of_an_unknown_job_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="'ghost'"):
        outcome([job("a", 1)], [Event(1.0, "bind", "ghost", "g-0", 1)], horizon=5.0)


def test_a_horizon_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="horizon"):
        outcome([job("a", 1)], [], horizon=0)


@pytest.mark.parametrize(
    ("values", "p", "expected"),
    [
        ([5.0], 50, 5.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.0),
        ([1.0, 2.0, 3.0, 4.0], 75, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 100, 4.0),
        ([float(i) for i in range(1, 101)], 95, 95.0),
        ([float(i) for i in range(1, 101)], 99, 99.0),
        ([3.0, 1.0, 2.0], 50, 2.0),
    ],
)
def test_percentile_is_nearest_rank(values: list[float], p: float, expected: float) -> None:
    assert percentile(values, p) == expected


@pytest.mark.parametrize(("values", "p"), [([], 50), ([1.0], 0), ([1.0], 101)])
def test_percentile_refuses_no_values_and_out_of_range_ranks(values: list[float], p: float) -> None:
    with pytest.raises(ValueError):
        percentile(values, p)


def _outcome(idle: float, makespan: float | None, completed: int = 2) -> Outcome:
    return Outcome(jobs=2, completed=completed, started=completed, deadlocked=2 - completed,
                   idle_gpu_seconds=idle, idle_share=idle / 640, makespan=makespan,
                   last_finish=makespan, wait_mean=1.0, wait_p95=2.0, spread_p95=0.5,
                   spread_max=0.5, horizon=10.0)  # fmt: skip


def test_summary_rows_compare_each_mode_with_the_baselines_of_the_same_run() -> None:
    rows = summary_rows({
        "none": _outcome(400.0, None, completed=1),
        "gate": _outcome(4.0, 60.0),
        "native": _outcome(0.0, 50.0),
        "coscheduling": "no scheduler",
    })  # fmt: skip
    by_mode = {r["mode"]: r for r in rows}
    assert [r["mode"] for r in rows] == ["none", "gate", "native", "coscheduling"]
    assert by_mode["gate"]["idle_vs_none"] == 0.01
    assert by_mode["native"]["idle_vs_none"] == 0
    assert by_mode["none"]["makespan_vs_best"] is None
    assert by_mode["gate"]["makespan_vs_best"] == 1.2
    assert by_mode["native"]["makespan_vs_best"] == 1.0
    assert by_mode["coscheduling"]["status"] == "not measurable: no scheduler"
    assert "series" in by_mode["gate"] and "series" not in by_mode["coscheduling"]
