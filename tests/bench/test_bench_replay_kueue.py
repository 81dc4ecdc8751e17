"""The replay driver under Kueue: Jobs queued by label, evicted members released."""

from __future__ import annotations

from types import SimpleNamespace

from bench.scheduling import (
    JOB_LABEL,
    KUEUE_MODES,
    NAMESPACES,
    QUEUE_LABEL,
    Event,
    Replay,
    TraceJob,
    job_manifest,
    outcome,
)

JOB = TraceJob("job-000", 0.0, members=2, gpus_per_member=4, duration=1.0)


def pod(name: str, node: str | None, phase: str = "Running") -> SimpleNamespace:
    return SimpleNamespace(
        metadata=SimpleNamespace(name=name, labels={JOB_LABEL: JOB.name}),
        spec=SimpleNamespace(node_name=node),
        status=SimpleNamespace(phase=phase),
    )


def driver() -> Replay:
    return Replay(None, None, "ns", [JOB], run_id="r", fleet="f", horizon=10.0,  # type: ignore[arg-type]
                  clock=lambda: 1.0)  # fmt: skip


def test_a_queued_job_carries_kueues_queue_label_and_its_pods_do_not() -> None:
    queued = job_manifest(JOB, run_id="r", fleet="f", queue="bench")
    assert queued["metadata"]["labels"][QUEUE_LABEL] == "bench"
    # Kueue reads the Job's label; a label on the pods would make them Kueue's plain
    # pods (its `pod` integration) as well.
    assert QUEUE_LABEL not in queued["spec"]["template"]["metadata"]["labels"]
    plain = job_manifest(JOB, run_id="r", fleet="f")
    assert QUEUE_LABEL not in plain["metadata"]["labels"]


def test_each_kueue_mode_has_its_own_namespace() -> None:
    assert len({NAMESPACES[m] for m in KUEUE_MODES}) == len(KUEUE_MODES)
    assert set(NAMESPACES[m] for m in KUEUE_MODES).isdisjoint(
        NAMESPACES[m] for m in NAMESPACES if m not in KUEUE_MODES
    )


def test_a_bound_member_deleted_before_its_gang_ran_frees_its_gpus_and_is_not_counted() -> None:
    replay = driver()
    replay._on_pod(pod("job-000-0-aaaaa", "n1"))
    replay._on_gone(pod("job-000-0-aaaaa", "n1", "Failed"))  # Kueue evicted the Job
    # The Job is readmitted: two new pods bind. Only now is the gang whole.
    replay._on_pod(pod("job-000-1-bbbbb", "n2"))
    assert replay._to_start == []
    replay._on_pod(pod("job-000-0-ccccc", "n1"))
    assert sorted(p for _, p in replay._to_start) == ["job-000-0-ccccc", "job-000-1-bbbbb"]
    assert replay.lost == 1
    kinds = [(e.kind, e.pod) for e in replay.events]
    assert kinds == [
        ("bind", "job-000-0-aaaaa"),
        ("release", "job-000-0-aaaaa"),
        ("bind", "job-000-1-bbbbb"),
        ("bind", "job-000-0-ccccc"),
    ]


def test_a_pod_that_was_never_bound_or_already_finished_changes_nothing_when_deleted() -> None:
    replay = driver()
    replay._on_gone(pod("job-000-0-aaaaa", None))
    replay._on_pod(pod("job-000-0-bbbbb", "n1", "Succeeded"))
    replay._on_gone(pod("job-000-0-bbbbb", "n1", "Succeeded"))
    assert [e.kind for e in replay.events] == ["bind", "release"]
    assert replay.lost == 0


def test_an_evicted_partial_gang_holds_gpus_only_until_its_pods_are_gone() -> None:
    events = [
        Event(0.0, "arrive", JOB.name),
        Event(1.0, "bind", JOB.name, "a", 4),
        Event(11.0, "release", JOB.name, "a", 4),  # evicted after Kueue's timeout
    ]
    result = outcome([JOB], events, horizon=20.0)
    assert result.idle_gpu_seconds == 40.0
    assert result.deadlocked == 1 and result.started == 0


def test_every_modes_run_id_is_a_valid_label_value() -> None:
    import re

    from bench.scheduling import MODES, run_id

    value = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
    for mode in MODES:
        label = run_id(mode, 1796307104)
        assert value.match(label) and len(label) <= 63, label
