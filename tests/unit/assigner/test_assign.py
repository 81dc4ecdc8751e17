"""The assigner: every member on a node with room, or a reason; plain values only."""

from __future__ import annotations

from collections.abc import Mapping

from gangkeeper.policies.assigner import (
    Assignment,
    Member,
    NodeView,
    NoRoom,
    Unpinned,
    assign,
)
from gangkeeper.policies.cluster.node_facts import UNSCHEDULABLE_TAINT
from gangkeeper.policies.model import Placement, Taint, Toleration

GPU = "nvidia.com/gpu"


def node(name: str, gpus: int = 8, cpu: int = 64_000, **kw: object) -> NodeView:
    free = {GPU: gpus, "cpu": cpu, "memory": 512 * 2**30, "pods": 110}
    base: dict[str, object] = {
        "name": name, "labels": {"kubernetes.io/hostname": name, "pool": "a"},
        "taints": (), "free": free,
    }
    base.update(kw)
    return NodeView(**base)  # type: ignore[arg-type]


def member(name: str, gpus: int, cpu: int = 1000, **kw: object) -> Member:
    return Member(name, {GPU: gpus, "cpu": cpu, "pods": 1}, **kw)  # type: ignore[arg-type]


def used(result: Assignment, members: list[Member]) -> Mapping[str, dict[str, int]]:
    by_name = {m.name: m for m in members}
    totals: dict[str, dict[str, int]] = {}
    for name, target in result.nodes.items():
        for r, a in by_name[name].requests.items():
            totals.setdefault(target, {})[r] = totals.setdefault(target, {}).get(r, 0) + a
    return totals


def test_8_4_4_on_two_8_gpu_nodes_puts_the_4s_together() -> None:
    members = [member("w-4a", 4), member("w-8", 8), member("w-4b", 4)]
    result = assign(members, [node("n1"), node("n2")])
    assert isinstance(result, Assignment)
    assert result.nodes["w-4a"] == result.nodes["w-4b"] != result.nodes["w-8"]


def test_cpu_not_gpus_can_be_what_runs_out() -> None:
    # n1 has 8 GPUs but only 2 cores free: the 4-core members cannot share it.
    members = [member("a", 4, cpu=4000), member("b", 4, cpu=4000)]
    result = assign(members, [node("n1", cpu=2000), node("n2", gpus=8, cpu=8000)])
    assert isinstance(result, Assignment)
    assert set(result.nodes.values()) == {"n2"}
    result = assign(members, [node("n1", cpu=2000), node("n2", gpus=8, cpu=6000)])
    assert isinstance(result, NoRoom)


def test_a_cordoned_not_ready_or_tainted_node_is_never_chosen() -> None:
    members = [member("a", 8)]
    cordoned = node("n0", unschedulable=True, taints=(UNSCHEDULABLE_TAINT,))
    not_ready = node("n1", ready=False)
    tainted = node("n2", taints=(Taint("dedicated", "x", "NoSchedule"),))
    executes = node("n3", taints=(Taint("dedicated", "x", "NoExecute"),))
    good = node("n9")
    result = assign(members, [cordoned, not_ready, tainted, executes, good])
    assert isinstance(result, Assignment) and result.nodes == {"a": "n9"}
    assert isinstance(assign(members, [cordoned, not_ready, tainted, executes]), NoRoom)
    tolerant = member(
        "a", 8, placement=Placement(tolerations=(Toleration("dedicated", "Exists"),))
    )
    result = assign([tolerant], [tainted])
    assert isinstance(result, Assignment) and result.nodes == {"a": "n2"}


def test_prefer_no_schedule_does_not_exclude() -> None:
    soft = node("n1", taints=(Taint("x", "", "PreferNoSchedule"),))
    assert isinstance(assign([member("a", 1)], [soft]), Assignment)


def test_node_selector_and_a_users_hostname_pin_are_honoured() -> None:
    pinned = member("a", 4, placement=Placement(node_selector=(("kubernetes.io/hostname", "n2"),)))
    other = member("b", 4, placement=Placement(node_selector=(("pool", "b"),)))
    pool_b = node("n3", labels={"kubernetes.io/hostname": "n3", "pool": "b"})
    nodes = [node("n1"), node("n2"), pool_b]
    result = assign([pinned, other], nodes)
    assert isinstance(result, Assignment)
    assert result.nodes == {"a": "n2", "b": "n3"}


def test_a_node_without_a_hostname_label_is_pinned_on_by_its_name() -> None:
    result = assign([member("a", 1)], [node("n1", labels={"pool": "a"})])
    assert isinstance(result, Assignment) and result.nodes == {"a": "n1"}


def test_pod_count_and_other_resources_count() -> None:
    full = node("n1", free={GPU: 8, "cpu": 64_000, "pods": 1})
    result = assign([member("a", 1), member("b", 1)], [full])
    assert isinstance(result, NoRoom)
    storage = Member("a", {"ephemeral-storage": 10, "pods": 1})
    assert isinstance(assign([storage], [node("n1")]), NoRoom)  # none offered


def test_an_unmodeled_constraint_leaves_the_gang_unpinned() -> None:
    result = assign([member("a", 1), member("b", 1, unmodeled="a hostPort")], [node("n1")])
    assert isinstance(result, Unpinned)
    assert "pod b has a hostPort" in result.reason


def test_large_gangs_use_best_fit_decreasing() -> None:
    nodes = [node(f"n{i}") for i in range(40)]
    members = [member(f"m{i}", 8 if i % 3 == 0 else 4) for i in range(100)]
    # 34 eights (34 nodes), 66 fours: 33 more nodes; 67 > 40 nodes: no room.
    assert isinstance(assign(members, nodes), NoRoom)
    members = members[:60]  # 20 eights + 40 fours = 40 nodes exactly
    result = assign(members, nodes, exact_members=10)
    assert isinstance(result, Assignment)
    for totals in used(result, members).values():
        assert totals[GPU] <= 8


def test_the_exact_search_backtracks_where_greedy_fails() -> None:
    nodes = [node("a", gpus=4), node("b", gpus=6)]
    members = [member("x", 3), member("y", 3), member("z", 2), member("w", 2)]
    # Only {3,3} on b and {2,2} on a works; best fit alone sends the first 3 to a
    # (the tightest node) and is then stuck.
    result = assign(members, nodes)
    assert isinstance(result, Assignment)
    assert result.nodes["x"] == result.nodes["y"] == "b"
    assert isinstance(assign(members, nodes, exact_members=0), NoRoom)
