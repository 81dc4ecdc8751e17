"""The scheduling trace: seeded, reproducible, and shaped like the brief says."""

from __future__ import annotations

import dataclasses

import pytest

from bench.scheduling import (
    FLEET_NODES,
    GPUS_PER_NODE,
    TraceJob,
    TraceParams,
    generate_trace,
    horizon_for,
    ideal_makespan,
    job_manifest,
    params_for,
)


def test_the_same_seed_gives_the_same_trace() -> None:
    assert generate_trace(TraceParams(seed=11)) == generate_trace(TraceParams(seed=11))


def test_a_different_seed_gives_a_different_trace() -> None:
    assert generate_trace(TraceParams(seed=11)) != generate_trace(TraceParams(seed=12))


@pytest.mark.parametrize(("quick", "at_least"), [(True, 20), (False, 40)])
def test_benchmark_traces_have_enough_jobs_of_one_to_thirty_two_gpus(
    quick: bool, at_least: int
) -> None:
    jobs = generate_trace(params_for(quick))
    assert len(jobs) >= at_least
    assert all(1 <= j.gpus <= 32 for j in jobs)
    # Both ends of the range occur, so the trace has single-GPU jobs and half-fleet gangs.
    assert min(j.gpus for j in jobs) <= 2
    assert max(j.gpus for j in jobs) >= 24


@pytest.mark.parametrize("seed", range(5))
def test_every_member_fits_one_node_and_the_members_add_up_to_the_gang(seed: int) -> None:
    for job in generate_trace(TraceParams(seed=seed, jobs=60)):
        assert job.gpus_per_member in (1, 2, 4, 8)
        assert job.gpus_per_member <= GPUS_PER_NODE
        assert job.members * job.gpus_per_member == job.gpus
        assert job.duration > 0


def test_arrivals_start_at_zero_and_never_go_back() -> None:
    arrivals = [j.arrival for j in generate_trace(TraceParams(jobs=50))]
    assert arrivals[0] == 0
    assert arrivals == sorted(arrivals)


def test_mean_interarrival_is_roughly_the_parameter() -> None:
    # A Poisson process: over 2,000 jobs the mean gap is close to the asked one.
    jobs = generate_trace(TraceParams(jobs=2000, mean_interarrival=2.0))
    mean_gap = jobs[-1].arrival / (len(jobs) - 1)
    assert abs(mean_gap - 2.0) < 0.2


def test_job_names_are_unique_and_in_arrival_order() -> None:
    jobs = generate_trace(TraceParams(jobs=40))
    assert [j.name for j in jobs] == sorted({j.name for j in jobs})


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"jobs": 0}, "jobs"),
        ({"mean_interarrival": 0.0}, "mean_interarrival"),
        ({"mean_duration": -1.0}, "mean_duration"),
        ({"sizes": (1, 2), "weights": (1.0,)}, "weights"),
        ({"sizes": (1, 65), "weights": (1.0, 1.0)}, "sizes"),
    ],
)
def test_bad_trace_parameters_are_refused_naming_the_field(
    change: dict[str, object], field: str
) -> None:
    params = dataclasses.replace(TraceParams(), **change)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=field):
        generate_trace(params)


def test_ideal_makespan_is_the_larger_of_work_over_fleet_and_the_last_job() -> None:
    fleet = FLEET_NODES * GPUS_PER_NODE
    crowded = [TraceJob("a", 0.0, 64, 1, 10.0), TraceJob("b", 0.0, 64, 1, 10.0)]
    assert ideal_makespan(crowded) == pytest.approx(2 * 64 * 10.0 / fleet)
    late = [TraceJob("a", 0.0, 1, 1, 1.0), TraceJob("b", 50.0, 1, 1, 5.0)]
    assert ideal_makespan(late) == 55.0
    assert horizon_for(late) > ideal_makespan(late)


def test_a_trace_job_is_an_indexed_job_of_its_members_with_their_gpu_share() -> None:
    job = TraceJob("job-007", 0.0, members=4, gpus_per_member=2, duration=1.0)
    manifest = job_manifest(job, run_id="r1", fleet="sched")
    spec = manifest["spec"]
    assert (manifest["kind"], manifest["metadata"]["name"]) == ("Job", "job-007")
    assert (spec["completionMode"], spec["parallelism"], spec["completions"]) == ("Indexed", 4, 4)
    pod = spec["template"]
    assert pod["metadata"]["labels"]["bench.gangkeeper.io/job"] == "job-007"
    # No run time at creation: members train only once the whole gang runs.
    assert "pod-complete.stage.kwok.x-k8s.io/delay" not in pod["metadata"]["annotations"]
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "2"
    assert pod["spec"]["nodeSelector"] == {"bench.gangkeeper.io/fleet": "sched"}

