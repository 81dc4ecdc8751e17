"""Feasibility: reject only the proven impossible, with the numbers; warn when it must wait."""

# Messages use the multiplication sign on purpose (the README quotes them: they name the numbers).
# ruff: noqa: RUF001, RUF003

from __future__ import annotations

from typing import Any

import pytest

from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.fit.feasibility import MAX_WARNING, check_gang, fits_now
from gangkeeper.policies.model import (
    Gang,
    NodeSelectorTerm,
    Placement,
    Requirement,
    Role,
    Source,
    Toleration,
)
from gangkeeper.policies.settings.config import Config, NodePool

GPU = "nvidia.com/gpu"
AMD = "amd.com/gpu"


def node(
    name: str,
    gpus: dict[str, int] | int,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    amounts = {GPU: gpus} if isinstance(gpus, int) else gpus
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {r: str(a) for r, a in amounts.items()}},
    }


def cluster(*amounts: int | dict[str, int], config: Config | None = None) -> Capacity:
    return Capacity.from_nodes([node(f"n{i}", a) for i, a in enumerate(amounts)], config)


def role(
    count: int, gpus: int | dict[str, int], name: str = "worker", placement: Placement | None = None
) -> Role:
    demand = {GPU: gpus} if isinstance(gpus, int) else gpus
    return Role(name=name, count=count, demand=demand, placement=placement or Placement())


def gang(*roles: Role, min_member: int | None = None, name: str = "llama-ft") -> Gang:
    size = sum(r.count for r in roles)
    return Gang(
        namespace="default",
        name=name,
        min_member=size if min_member is None else min_member,
        roles=roles,
        source=Source("batch/v1", "Job", "default", name),
    )


def test_the_design_example_message_names_the_numbers() -> None:
    verdict = check_gang(gang(role(8, 1)), cluster(4, 1))
    assert not verdict.allowed
    assert verdict.code == "total-demand"
    assert verdict.reason == (
        "gang default/llama-ft needs 8 × 1 nvidia.com/gpu = 8; "
        "the nodes it may use hold at most 5 (2 nodes: 4+1)"
    )


def test_a_gang_that_fits_the_empty_cluster_is_admitted_without_remark() -> None:
    verdict = check_gang(gang(role(5, 1)), cluster(4, 1))
    assert verdict.allowed
    assert verdict.reason == verdict.code == ""
    assert verdict.warnings == ()


def test_a_member_bigger_than_every_node_is_rejected() -> None:
    verdict = check_gang(gang(role(1, 8)), cluster(4, 4, 4))
    assert not verdict.allowed
    assert verdict.code == "member-too-big"
    assert "8 nvidia.com/gpu" in verdict.reason
    assert "largest node it may use has 4 nvidia.com/gpu" in verdict.reason


@pytest.mark.parametrize(
    ("count", "need", "nodes", "allowed"),
    [
        (3, 3, (4, 4), False),  # 9 GPUs wanted, 8 exist
        (2, 3, (4, 4), True),
        (3, 2, (3, 3, 1), False),  # 7 ≥ 6 but each node holds one member
        (2, 2, (3, 3, 1), True),
        (4, 2, (8,), True),
        (5, 2, (8, 1, 1), False),
        (3, 5, (16,), True),
        (4, 5, (16, 4), False),
    ],
)
def test_identical_members_pack_exactly_by_floor_division(
    count: int, need: int, nodes: tuple[int, ...], allowed: bool
) -> None:
    verdict = check_gang(gang(role(count, need)), cluster(*nodes))
    assert verdict.allowed is allowed
    if not allowed:
        assert verdict.code in ("total-demand", "packing")


def test_packing_message_counts_the_members_that_fit() -> None:
    verdict = check_gang(gang(role(3, 2)), cluster(3, 3, 1))
    assert verdict.code == "packing"
    assert "fit only 2" in verdict.reason
    assert "(3 nodes: 3+3+1)" in verdict.reason


def test_several_gpu_resources_per_pod_pack_by_the_scarcest() -> None:
    both = {GPU: 1, AMD: 1}
    capacity = cluster({GPU: 4, AMD: 1}, {GPU: 1, AMD: 4})
    assert check_gang(gang(role(2, both)), capacity).allowed
    verdict = check_gang(gang(role(3, both)), capacity)
    assert not verdict.allowed
    assert verdict.code == "packing"


def test_resources_are_never_summed_across_names() -> None:
    verdict = check_gang(gang(role(2, {AMD: 4})), cluster(8, 8))
    assert not verdict.allowed
    assert "amd.com/gpu" in verdict.reason


def test_nodes_the_role_may_not_use_do_not_count() -> None:
    a100 = Placement(node_selector=(("gpu", "a100"),))
    capacity = Capacity.from_nodes(
        [node("a", 4, {"gpu": "a100"}), node("b", 8, {"gpu": "l4"}), node("c", 1, {"gpu": "a100"})]
    )
    verdict = check_gang(gang(role(8, 1, placement=a100)), capacity)
    assert verdict.reason == (
        "gang default/llama-ft needs 8 × 1 nvidia.com/gpu = 8; "
        "the nodes it may use hold at most 5 (2 nodes: 4+1)"
    )


def test_tainted_nodes_count_only_for_tolerating_roles() -> None:
    taint = [{"key": "dedicated", "value": "training", "effect": "NoSchedule"}]
    capacity = Capacity.from_nodes([node("t", 8, taints=taint)])
    plain = check_gang(gang(role(1, 8)), capacity)
    assert not plain.allowed
    assert plain.code == "no-eligible-nodes"
    tolerant = Placement(tolerations=(Toleration(key="dedicated", value="training"),))
    assert check_gang(gang(role(1, 8, placement=tolerant)), capacity).allowed


def test_heterogeneous_gang_that_cannot_be_packed_is_rejected_by_search() -> None:
    # 8 GPUs total = 2×3 + 1×2, but a node holding a 3 has 1 left: the 2 fits nowhere.
    verdict = check_gang(gang(role(2, 3, "a"), role(1, 2, "b")), cluster(4, 4))
    assert not verdict.allowed
    assert verdict.code == "packing"
    assert "2 × 3 + 1 × 2 nvidia.com/gpu = 8" in verdict.reason


def test_heterogeneous_gang_that_packs_only_one_way_is_admitted() -> None:
    # The 3 must go on the 3-GPU node so both 2s fit the 4-GPU node.
    assert check_gang(gang(role(1, 3, "a"), role(2, 2, "b")), cluster(4, 3)).allowed


def test_role_subsets_are_checked_against_the_nodes_they_share() -> None:
    only_x = Placement(node_selector=(("pool", "x"),))
    capacity = Capacity.from_nodes([node("x", 4, {"pool": "x"}), node("y", 8, {"pool": "y"})])
    # Each x-only role fits alone and the total (6 of 12) fits, but together the
    # x-only roles need 5 of the 4 GPUs that pool x has.
    verdict = check_gang(
        gang(role(1, 3, "a", only_x), role(1, 2, "b", only_x), role(1, 1, "c")), capacity
    )
    assert not verdict.allowed
    assert verdict.code == "total-demand"
    assert verdict.reason == (
        "gang default/llama-ft (roles a, b) needs 1 × 3 + 1 × 2 nvidia.com/gpu = 5; "
        "the nodes it may use hold at most 4 (1 node: 4)"
    )


def test_members_without_gpus_are_not_checked() -> None:
    launcher = role(1, {}, "launcher")
    assert check_gang(gang(launcher), cluster()).allowed
    assert check_gang(gang(launcher, role(2, 4)), cluster(8)).allowed


@pytest.mark.parametrize(
    ("min_member", "allowed"),
    [(8, False), (6, False), (5, True), (1, True), (0, True)],
)
def test_only_min_member_members_must_fit(min_member: int, allowed: bool) -> None:
    assert check_gang(gang(role(8, 1), min_member=min_member), cluster(4, 1)).allowed is allowed


def test_min_member_counts_gpu_free_members_first() -> None:
    # 1 launcher + 4 workers, minMember 3: the launcher and 2 workers suffice.
    g = gang(role(1, {}, "launcher"), role(4, 4, "worker"), min_member=3)
    assert check_gang(g, cluster(8)).allowed
    assert not check_gang(gang(role(1, {}, "l"), role(4, 4, "w"), min_member=4), cluster(8)).allowed


def test_min_member_takes_the_cheapest_members_when_roles_are_ordered() -> None:
    # Roles of 1 and 4 GPUs on the same nodes: the cheapest 3 members are 1+1+4 = 6.
    g = gang(role(2, 1, "small"), role(2, 4, "big"), min_member=3)
    assert check_gang(g, cluster(6)).allowed
    assert not check_gang(g, cluster(5)).allowed


def test_min_member_with_incomparable_roles_lets_the_search_choose() -> None:
    # "a" may use only pool x, "b" only pool y; any 2 of the 4 members must fit.
    x = Placement(node_selector=(("pool", "x"),))
    y = Placement(node_selector=(("pool", "y"),))
    capacity = Capacity.from_nodes([node("x", 2, {"pool": "x"}), node("y", 1, {"pool": "y"})])
    assert check_gang(gang(role(2, 2, "a", x), role(2, 1, "b", y), min_member=2), capacity).allowed
    verdict = check_gang(gang(role(2, 2, "a", x), role(2, 1, "b", y), min_member=3), capacity)
    assert not verdict.allowed
    assert "minMember 3 of 4" in verdict.reason


def test_no_gpu_nodes_and_no_pools_admits_with_a_warning() -> None:
    verdict = check_gang(gang(role(8, 1)), Capacity())
    assert verdict.allowed
    assert len(verdict.warnings) == 1
    assert "no GPU nodes or pools" in verdict.warnings[0]


def test_a_pool_scaled_to_zero_still_admits_what_it_could_run() -> None:
    pool = NodePool(name="h100", max_count=2, allocatable={GPU: 8})
    capacity = Capacity(Config(pools=(pool,)))
    assert check_gang(gang(role(16, 1)), capacity).allowed
    verdict = check_gang(gang(role(17, 1)), capacity)
    assert not verdict.allowed
    assert "(2 nodes: 8+8)" in verdict.reason


def test_fits_the_cluster_but_not_free_capacity_admits_with_a_short_warning() -> None:
    capacity = cluster(4, 4)
    capacity.add_pod("busy", "n0", {GPU: 3})
    verdict = check_gang(gang(role(6, 1)), capacity)
    assert verdict.allowed
    assert verdict.warnings == (
        "gang default/llama-ft fits the cluster but only 5 of the 6 nvidia.com/gpu it needs "
        "are free now; it will wait",
    )
    assert not fits_now(gang(role(6, 1)), capacity)
    capacity.remove_pod("busy")
    assert fits_now(gang(role(6, 1)), capacity)
    assert check_gang(gang(role(6, 1)), capacity).warnings == ()


def test_fragmented_free_capacity_is_not_a_fit_now() -> None:
    capacity = cluster(4, 4)
    capacity.add_pod("a", "n0", {GPU: 2})
    capacity.add_pod("b", "n1", {GPU: 2})
    g = gang(role(1, 3))
    assert not fits_now(g, capacity)
    verdict = check_gang(g, capacity)
    assert verdict.allowed
    assert "not the GPUs free now" in verdict.warnings[0]


def test_cordoned_nodes_can_run_the_gang_later_but_not_now() -> None:
    raw = node("c", 8)
    raw["spec"]["unschedulable"] = True
    capacity = Capacity.from_nodes([raw])
    assert check_gang(gang(role(1, 8)), capacity).allowed
    assert not fits_now(gang(role(1, 8)), capacity)


def test_warnings_stay_within_the_api_server_limit() -> None:
    capacity = cluster(8)
    capacity.add_pod("busy", "n0", {GPU: 8})
    verdict = check_gang(gang(role(1, 8), name="x" * 250), capacity)
    assert verdict.allowed
    assert all(len(w) <= MAX_WARNING for w in verdict.warnings)
    assert check_gang(gang(role(1, 8), name="y" * 250), Capacity()).warnings[0].__len__() <= 120


def test_pinned_members_need_their_named_node() -> None:
    def pinned(name: str) -> Placement:
        req = Requirement("metadata.name", "In", (name,))
        return Placement(required_terms=(NodeSelectorTerm(match_fields=(req,)),))

    capacity = cluster(4, 4)
    apart = gang(role(1, 4, "a", pinned("n0")), role(1, 4, "b", pinned("n1")))
    assert check_gang(apart, capacity).allowed
    verdict = check_gang(
        gang(role(1, 4, "a", pinned("n0")), role(1, 4, "b", pinned("n0"))), capacity
    )
    assert not verdict.allowed


def test_large_heterogeneous_gangs_are_decided_or_admitted_quickly() -> None:
    roles = tuple(role(20, need, f"r{need}") for need in (1, 2, 3, 5))
    capacity = cluster(*([8] * 40 + [4] * 20))
    assert check_gang(gang(*roles), capacity).allowed


def test_non_gpu_resources_in_a_demand_are_ignored() -> None:
    assert check_gang(gang(role(1, {GPU: 1, "cpu": 100})), cluster(1)).allowed


def test_huge_heterogeneous_gangs_are_admitted_by_bounds_without_deep_search() -> None:
    # 2,000 members: more than the search recurses into; the bounds pass, so admit.
    capacity = cluster(*([8] * 500))
    g = gang(role(1000, 3, "a"), role(1000, 1, "b"))
    assert check_gang(g, capacity).allowed


def test_search_time_is_bounded_on_an_adversarial_gang() -> None:
    # Bounds pass (122 of 123 GPUs, enough 4-GPU slots) but the packing is impossible;
    # whether the search proves it or runs out of budget, it must stop and not reject
    # what it did not prove.
    sizes = [3] * 4 + [4] * 4 + [5] * 4 + [7] * 5 + [8] * 5
    g = gang(role(4, 1, "a"), role(23, 4, "b"), role(13, 2, "c"))
    verdict = check_gang(g, cluster(*sizes))
    assert verdict.allowed or verdict.code == "packing"


def test_an_equal_gang_built_again_gets_the_same_answer_without_a_new_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A planning pass builds every waiting gang's model afresh, pass after pass.
    from gangkeeper.policies.fit import feasibility

    searched: list[str] = []
    real = feasibility._check_ever

    def counted(g: Gang, *args: Any) -> Any:
        searched.append(g.name)
        return real(g, *args)

    monkeypatch.setattr(feasibility, "_check_ever", counted)
    capacity = cluster(8, 8)
    first = check_gang(gang(role(3, 8)), capacity)
    again = check_gang(gang(role(3, 8)), capacity)
    assert not first.allowed and again == first
    assert searched == ["llama-ft"]
    # Another demand, or another name (the reason names it), is another answer.
    assert check_gang(gang(role(2, 8)), capacity).allowed
    assert "other" in check_gang(gang(role(3, 8), name="other"), capacity).reason
    assert searched == ["llama-ft", "llama-ft", "other"]


def test_an_answer_kept_by_value_is_not_given_once_the_nodes_change() -> None:
    capacity = cluster(8, 8)
    assert not check_gang(gang(role(3, 8)), capacity).allowed
    capacity.upsert_node(node("n2", 8))
    assert check_gang(gang(role(3, 8)), capacity).allowed
