"""Gangs without GPUs are gangs too (issue 24): a gang whose members ask only cpu and
memory is released only when every member has a node with room for all it asks, is
pinned there, holds the nodes it may use while it waits, and holds nothing when it can
never fit. `status` never calls a gang released while members are unbound."""

from __future__ import annotations

from typing import Any

from builders.gangs import T0, members, node, plain_node, pod, released, requesting

from gangkeeper.policies.cluster.observed_gangs import is_live, pod_info
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import GangReport, Plan
from gangkeeper.policies.release.status import render_text
from gangkeeper.policies.settings.config import Config, load_config

NOW = T0 + 60
MI = 2**20
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def decide(
    pods: list[dict[str, Any]], nodes: list[dict[str, Any]], config: Config | None = None
) -> Plan:
    cfg = config or Config()
    return plan([pod_info(p, cfg) for p in pods if is_live(p)], nodes, cfg, NOW)


def report(result: Plan, label: str) -> GangReport:
    return next(r for r in result.reports if r.label == label)


def released_pods(result: Plan, label: str) -> set[str]:
    return {p.name for r in result.releases if r.gang.label == label for p in r.pods}


def pins(result: Plan) -> dict[str, str]:
    return {p.name: r.pins[p.uid] for r in result.releases for p in r.pods if p.uid in r.pins}


def cpu_gang(name: str, count: int, memory: str = "100Mi", **kwargs: Any) -> list[dict[str, Any]]:
    return requesting(members(name, count, gpus=0, **kwargs), memory=memory)


def web(name: str, node_name: str, memory: str) -> dict[str, Any]:
    """A running pod of no gang taking `memory` on `node_name`."""
    raw = pod(name, 0, gates=(), node_name=node_name, phase="Running")
    return requesting([raw], memory=memory)[0]


def two_nodes() -> list[dict[str, Any]]:
    return [plain_node("a"), plain_node("b")]  # 300Mi memory each


def test_a_cpu_gang_that_does_not_fit_now_waits_whole_with_numbers() -> None:
    # 4 x 100Mi; node a has 50Mi left, b 300Mi: three members fit, so none goes.
    result = decide([web("busy", "a", "250Mi"), *cpu_gang("c", 4)], two_nodes())
    assert result.releases == ()
    got = report(result, "c")
    assert (got.state, got.code) == ("waiting", "no-fit")
    assert "400Mi memory asked, 350Mi memory free" in got.reason


def test_it_is_released_whole_and_pinned_within_every_node_once_room_appears() -> None:
    result = decide(cpu_gang("c", 4), two_nodes())
    assert released_pods(result, "c") == {"c-0", "c-1", "c-2", "c-3"}
    where = pins(result)
    assert set(where) == {"c-0", "c-1", "c-2", "c-3"}
    per_node = {n: sum(100 for h in where.values() if h == n) for n in set(where.values())}
    assert all(mib <= 300 for mib in per_node.values())  # no node over its memory
    assert report(result, "c").state == "releasing"


def test_a_waiting_cpu_gang_holds_its_nodes_against_a_later_cpu_gang() -> None:
    later = cpu_gang("d", 1, memory="10Mi", created=T0 + 100)
    result = decide([web("busy", "a", "250Mi"), *cpu_gang("c", 4), *later], two_nodes())
    assert result.releases == ()
    got = report(result, "d")
    assert (got.state, got.code) == ("waiting", "held")
    assert "held for team/c" in got.reason


def test_a_cpu_gang_that_can_never_fit_holds_nothing() -> None:
    later = cpu_gang("d", 1, memory="10Mi", created=T0 + 100)
    result = decide([*cpu_gang("c", 4, memory="400Mi"), *later], two_nodes())
    assert released_pods(result, "c") == set()
    assert "it cannot fit even on the empty cluster, so it holds no nodes" in report(
        result, "c"
    ).reason
    assert released_pods(result, "d") == {"d-0"}


def test_a_waiting_gpu_gang_never_holds_nodes_without_gpus() -> None:
    busy = pod("busy", 8, gates=(), node_name="gpu", phase="Running")
    gpu_gang = members("g", 1, gpus=8)
    cpu = cpu_gang("c", 2, created=T0 + 100)
    result = decide([busy, *gpu_gang, *cpu], [node("gpu", 8), plain_node("a")])
    assert report(result, "g").state == "waiting"
    assert pins(result) == {"c-0": "a", "c-1": "a"}


def test_a_cpu_gang_does_not_hold_gpu_nodes_it_may_not_use() -> None:
    # GPU nodes tainted for GPU pods, as the GPU operator does: the waiting CPU gang
    # may not use them, so it does not hold them against a later GPU gang.
    gpu_node = node("gpu", 8, taints=[GPU_TAINT])
    toleration = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    gpu_gang = members("g", 1, gpus=8, created=T0 + 100, tolerations=toleration)
    pods = [web("busy", "a", "250Mi"), *cpu_gang("c", 4), *gpu_gang]
    result = decide(pods, [*two_nodes(), gpu_node])
    assert report(result, "c").state == "waiting"
    assert released_pods(result, "g") == {"g-0"}


def test_an_untainted_gpu_node_is_room_for_a_cpu_gang_too() -> None:
    result = decide(cpu_gang("c", 4), [plain_node("a"), node("gpu", 8)])
    assert set(pins(result).values()) <= {"a", "gpu"} and len(pins(result)) == 4


def test_placement_scheduler_still_waits_for_room_but_pins_nothing() -> None:
    scheduler = load_config({"placement": "scheduler"})
    waiting = decide([web("busy", "a", "250Mi"), *cpu_gang("c", 4)], two_nodes(), scheduler)
    assert waiting.releases == ()
    result = decide(cpu_gang("c", 4), two_nodes(), scheduler)
    assert released_pods(result, "c") == {"c-0", "c-1", "c-2", "c-3"}
    assert pins(result) == {}


def test_an_elastic_cpu_gang_releases_the_members_that_fit_once_min_member_can() -> None:
    # minMember 2 of 4; 3 members of 100Mi fit (a has 50Mi left, b 300Mi).
    gang = cpu_gang("c", 4, min_member=2)
    result = decide([web("busy", "a", "250Mi"), *gang], two_nodes())
    assert len(released_pods(result, "c")) == 3
    assert set(pins(result).values()) == {"b"}


def test_a_gang_whose_gates_are_lifted_is_releasing_until_every_member_is_bound() -> None:
    nodes = [node(f"n{i}", 8) for i in range(4)]
    partly = decide(released(4, bound=1, released_at=NOW - 5), nodes)
    got = report(partly, "g")
    assert (got.state, got.reason) == ("releasing", "binding: 1 of 4 bound")
    assert "released" not in render_text(partly.reports).splitlines()[1].split()
    # Unbound for long, the watchdog's reason is given; the state stays releasing.
    stuck = report(decide(released(4, bound=1), nodes), "g")
    assert stuck.state == "releasing" and "3 members pinned but unbound" in stuck.reason
    whole = report(decide(released(4, bound=4), nodes), "g")
    assert (whole.state, whole.reason) == ("released", "all gates lifted")
