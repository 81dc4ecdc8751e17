"""When the controller nudges a released coscheduling PodGroup: only after GPUs were
freed (or on taking the lead), only gangs whose pods are not all bound."""

from __future__ import annotations

from builders.gangs import node, pod

from gangkeeper.policies.cluster.observed_gangs import PodInfo, pod_info
from gangkeeper.policies.names import NUDGE_ANNOTATION
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.requeue import (
    REQUEUE_AGAIN_SECONDS,
    NudgeMemory,
    capacity_rose,
    free_gpus,
    groups_to_nudge,
    nudges,
    requeue_patch,
)
from gangkeeper.policies.settings.config import Config

CFG = Config()
NODES = [node("n0", 4), node("n1", 4)]


def released(
    count: int, bound: int, *, backend: str = "coscheduling", gang: str = "train"
) -> list[PodInfo]:
    """Members of a gang whose gates are lifted; the first `bound` are on n0/n1."""
    return [
        pod_info(
            pod(f"{gang}-{i}", gang=gang, min_member=count, backend=backend, gates=(),
                node_name=f"n{i % 2}" if i < bound else ""),
            CFG,
        )
        for i in range(count)
    ]


def test_free_gpus_are_allocatable_less_the_pods_bound_there() -> None:
    busy = pod_info(pod("busy", 3, node_name="n0", phase="Running"), CFG)
    free = free_gpus(NODES, [busy], CFG)
    assert free == {("n0", "nvidia.com/gpu"): 1, ("n1", "nvidia.com/gpu"): 4}


def test_capacity_rose_when_any_node_frees_gpus_even_if_another_fills() -> None:
    before = {("n0", "nvidia.com/gpu"): 1, ("n1", "nvidia.com/gpu"): 4}
    assert capacity_rose(before, {("n0", "nvidia.com/gpu"): 4, ("n1", "nvidia.com/gpu"): 1})
    assert not capacity_rose(before, before)
    assert not capacity_rose(before, {("n0", "nvidia.com/gpu"): 0, ("n1", "nvidia.com/gpu"): 4})
    assert capacity_rose(before, {**before, ("n2", "nvidia.com/gpu"): 8})  # a node came
    assert capacity_rose(None, before)  # a new leader: nothing to compare with


def test_a_released_coscheduling_gang_not_all_bound_is_nudged_by_its_podgroup_name() -> None:
    pods = released(8, bound=0)
    reports = plan(pods, NODES, CFG, 0.0).reports
    assert groups_to_nudge(reports, pods) == [("team", "train")]


def test_bound_gated_and_other_backend_gangs_are_not_nudged() -> None:
    all_bound = released(8, bound=8, gang="done")
    volcano = released(4, bound=0, backend="volcano", gang="vc")
    gated = [pod_info(pod(f"g{i}", gang="wait", min_member=4, backend="coscheduling"), CFG)
             for i in range(4)]
    pods = all_bound + volcano + gated
    reports = plan(pods, NODES, CFG, 0.0).reports
    assert groups_to_nudge(reports, pods) == []


def test_the_nudge_changes_only_gangkeepers_annotation() -> None:
    assert requeue_patch("2026-12-01T10:00:00.000000Z") == {
        "metadata": {"annotations": {NUDGE_ANNOTATION: "2026-12-01T10:00:00.000000Z"}}
    }


def _nudges(pods: list[PodInfo], memory: NudgeMemory, clock: float) -> tuple[
        list[tuple[str, str]], float | None, NudgeMemory]:
    return nudges(plan(pods, NODES, CFG, 0.0).reports, pods, NODES, CFG, memory=memory,
                  clock=clock)


def test_a_new_leader_nudges_once_and_asks_for_a_pass_for_the_second_nudge() -> None:
    pods = released(8, bound=0)
    groups, wake_after, memory = _nudges(pods, NudgeMemory(), clock=100.0)
    assert groups == [("team", "train")]
    assert wake_after == REQUEUE_AGAIN_SECONDS
    assert memory.again_at == 100.0 + REQUEUE_AGAIN_SECONDS
    # Nothing freed since: no nudge until the second one is due, then one more.
    assert _nudges(pods, memory, clock=101.0)[0] == []
    groups, wake_after, after = _nudges(pods, memory, clock=102.5)
    assert groups == [("team", "train")] and wake_after is None
    assert after.again_at is None
    assert _nudges(pods, after, clock=110.0)[0] == []


def test_gpus_freed_nudge_again_without_a_second_timer_while_one_is_due() -> None:
    busy = pod_info(pod("busy", 4, node_name="n1", phase="Running"), CFG)
    pods = released(8, bound=0)
    _, _, memory = _nudges([*pods, busy], NudgeMemory(), clock=100.0)
    groups, wake_after, _ = _nudges(pods, memory, clock=100.5)  # busy gone: n1 freed
    assert groups == [("team", "train")] and wake_after is None


def test_with_nothing_to_nudge_the_memory_is_dropped() -> None:
    _, _, memory = _nudges(released(8, bound=0), NudgeMemory(), clock=100.0)
    assert _nudges(released(8, bound=8), memory, clock=101.0) == ([], None, NudgeMemory())
