"""Feasibility against a brute-force packer on random small clusters and gangs.

(a) never reject a gang the brute-force packer places (on the empty cluster);
(b) reject every homogeneous gang the brute-force packer proves impossible;
(d) the verdict does not depend on the order nodes were added in;
and the same two-sided agreement for `fits_now` on free capacity.

The oracle places members one by one on explicit nodes (no shapes, no bounds) and
uses `node_eligible` for the scheduler filters, which test_eligibility pins down.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.eligibility import node_eligible
from gangkeeper.policies.fit.feasibility import check_gang, fits_now
from gangkeeper.policies.model import (
    Gang,
    NodeSelectorTerm,
    Placement,
    Requirement,
    Role,
    Source,
    Taint,
    Toleration,
)

# Hypothesis scans loaded modules when it reports a failure and touches the
# deprecated mypy_extensions.TypedDict; without this the report itself crashes.
pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)

RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
PROPERTY_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)


@dataclass(frozen=True)
class FakeNode:
    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    gpus: dict[str, int]
    unschedulable: bool
    #: GPUs taken by pods bound to it, per resource.
    used: dict[str, int]

    def raw(self) -> dict[str, Any]:
        return {
            "metadata": {"name": self.name, "labels": self.labels},
            "spec": {
                "unschedulable": self.unschedulable,
                "taints": [
                    {"key": t.key, "value": t.value, "effect": t.effect} for t in self.taints
                ],
            },
            "status": {"allocatable": {r: str(a) for r, a in self.gpus.items()}},
        }


@st.composite
def nodes(draw: st.DrawFn) -> list[FakeNode]:
    count = draw(st.integers(0, 6))
    result = []
    for i in range(count):
        gpus = {
            r: a
            for r in RESOURCES
            if (a := draw(st.sampled_from([0, 0, 1, 2, 4, 8] if r == RESOURCES[0] else [0, 0, 2])))
        }
        used = {r: draw(st.integers(0, a)) for r, a in gpus.items()}
        labels = {"zone": draw(st.sampled_from(["a", "b"]))}
        if draw(st.booleans()):
            labels["tier"] = draw(st.sampled_from(["1", "2", "x"]))
        taints = tuple(
            Taint("dedicated", draw(st.sampled_from(["train", "serve"])), effect)
            for effect in draw(
                st.sampled_from([(), (), ("NoSchedule",), ("NoExecute",), ("PreferNoSchedule",)])
            )
        )
        result.append(
            FakeNode(f"n{i}", labels, taints, gpus, draw(st.booleans()) and i % 3 == 0, used)
        )
    return result


def requirement(draw: st.DrawFn) -> Requirement:
    kind = draw(st.sampled_from(["zone-in", "zone-notin", "tier-exists", "tier-gt", "name"]))
    if kind == "zone-in":
        return Requirement("zone", "In", (draw(st.sampled_from(["a", "b"])),))
    if kind == "zone-notin":
        return Requirement("zone", "NotIn", ("b",))
    if kind == "tier-exists":
        return Requirement("tier", draw(st.sampled_from(["Exists", "DoesNotExist"])))
    if kind == "tier-gt":
        return Requirement("tier", draw(st.sampled_from(["Gt", "Lt"])), ("1",))
    return Requirement("metadata.name", "In", (f"n{draw(st.integers(0, 5))}",))


@st.composite
def placements(draw: st.DrawFn) -> Placement:
    selector: tuple[tuple[str, str], ...] = ()
    if draw(st.integers(0, 3)) == 0:
        selector = (("zone", draw(st.sampled_from(["a", "b"]))),)
    terms: list[NodeSelectorTerm] = []
    for _ in range(draw(st.integers(0, 2)) if draw(st.booleans()) else 0):
        reqs = [requirement(draw) for _ in range(draw(st.integers(1, 2)))]
        fields = tuple(r for r in reqs if r.key == "metadata.name")
        exprs = tuple(r for r in reqs if r.key != "metadata.name")
        terms.append(NodeSelectorTerm(exprs, fields))
    tolerations: tuple[Toleration, ...] = ()
    if draw(st.booleans()):
        tolerations = (
            draw(
                st.sampled_from(
                    [
                        Toleration(key="dedicated", operator="Exists"),
                        Toleration(key="dedicated", value="train"),
                        Toleration(key="dedicated", value="train", effect="NoSchedule"),
                        Toleration(operator="Exists"),
                    ]
                )
            ),
        )
    return Placement(selector, tuple(terms), tolerations)


@st.composite
def demands(draw: st.DrawFn) -> dict[str, int]:
    demand = {RESOURCES[0]: draw(st.sampled_from([0, 1, 1, 2, 3, 4]))}
    if draw(st.integers(0, 4)) == 0:
        demand[RESOURCES[1]] = draw(st.sampled_from([1, 2]))
    return {r: a for r, a in demand.items() if a}


@st.composite
def gangs(draw: st.DrawFn, *, homogeneous: bool = False, partial: bool = False) -> Gang:
    role_count = 1 if homogeneous else draw(st.integers(2 if partial else 1, 3))
    budget = 10
    roles = []
    for i in range(role_count):
        count = draw(st.integers(1, max(1, budget - (role_count - i - 1))))
        budget -= count
        # Half the roles are unconstrained, so roles often share their nodes.
        placement = draw(placements()) if not partial and draw(st.booleans()) else Placement()
        demand = draw(demands().filter(bool) if partial else demands())
        roles.append(Role(f"r{i}", count, demand, placement))
    size = sum(r.count for r in roles)
    if partial:
        min_member = draw(st.integers(1, max(1, size - 1)))
    elif homogeneous or draw(st.booleans()):
        min_member = size
    else:
        min_member = draw(st.integers(0, size))
    return Gang("ns", "g", max(0, min_member), tuple(roles), Source("v1", "Pod", "ns", "g"))


def brute_force(gang: Gang, cluster: list[FakeNode], *, free: bool) -> bool:
    """Can at least minMember members be placed on these nodes? Plain backtracking."""
    members = [
        (role.demand, role.placement)
        for role in gang.roles
        for _ in range(role.count)
        if any(role.demand.values())
    ]
    no_gpu = gang.size - len(members)
    needed = max(0, min(gang.min_member, gang.size) - no_gpu)
    left = [{r: a - (n.used.get(r, 0) if free else 0) for r, a in n.gpus.items()} for n in cluster]

    def allowed(node: FakeNode, placement: Placement) -> bool:
        taints = node.taints
        if free and node.unschedulable:
            taints = (*taints, Taint("node.kubernetes.io/unschedulable", "", "NoSchedule"))
        return node_eligible(placement, node_name=node.name, labels=node.labels, taints=taints)

    def place(i: int, placed: int, floor: int) -> bool:
        if placed >= needed:
            return True
        if len(members) - i < needed - placed:
            return False
        demand, placement = members[i]
        same = i > 0 and members[i - 1] == members[i]
        # Identical consecutive members take nodes in non-decreasing order (index -1 is
        # "left out"), which removes permutations without losing any placement.
        start = floor if same else -1
        if start <= -1 and place(i + 1, placed, -1):
            return True
        for k in range(max(start, 0), len(cluster)):
            if not allowed(cluster[k], placement):
                continue
            if all(left[k].get(r, 0) >= a for r, a in demand.items()):
                for r, a in demand.items():
                    left[k][r] -= a
                ok = place(i + 1, placed + 1, k)
                for r, a in demand.items():
                    left[k][r] += a
                if ok:
                    return True
        return False

    return place(0, 0, -1)


def capacity_of(cluster: list[FakeNode]) -> Capacity:
    capacity = Capacity.from_nodes([n.raw() for n in cluster])
    for n in cluster:
        for r, a in n.used.items():
            if a:
                capacity.add_pod(f"{n.name}-{r}", n.name, {r: a})
    return capacity


@PROPERTY_SETTINGS
@given(cluster=nodes(), gang=gangs())
def test_never_rejects_a_gang_brute_force_places(cluster: list[FakeNode], gang: Gang) -> None:
    if brute_force(gang, cluster, free=False):
        verdict = check_gang(gang, capacity_of(cluster))
        assert verdict.allowed, verdict.reason


def near_the_limit(cluster: list[FakeNode], data: st.DataObject) -> Gang:
    """A homogeneous gang sized around what the cluster's GPUs could hold.

    Random sizes rarely hit the boundary (demand = capacity) where an off-by-one in a
    bound would show; this draws the count from the cluster instead.
    """
    demand = data.draw(demands().filter(bool))
    placement = data.draw(placements())
    total = min(sum(n.gpus.get(r, 0) for n in cluster) // a for r, a in demand.items())
    count = max(1, min(10, total + data.draw(st.integers(-1, 1))))
    role = Role("worker", count, demand, placement)
    return Gang("ns", "g", count, (role,), Source("v1", "Pod", "ns", "g"))


@PROPERTY_SETTINGS
@given(cluster=nodes(), gang=gangs(partial=True))
def test_never_rejects_a_partial_gang_brute_force_places(
    cluster: list[FakeNode], gang: Gang
) -> None:
    # minMember < size with roles sharing nodes: the "cheapest members" reduction.
    if brute_force(gang, cluster, free=False):
        verdict = check_gang(gang, capacity_of(cluster))
        assert verdict.allowed, verdict.reason


@PROPERTY_SETTINGS
@given(cluster=nodes(), data=st.data())
def test_rejects_every_homogeneous_gang_brute_force_proves_impossible(
    cluster: list[FakeNode], data: st.DataObject
) -> None:
    gang = (
        near_the_limit(cluster, data)
        if data.draw(st.booleans())
        else data.draw(gangs(homogeneous=True))
    )
    capacity = capacity_of(cluster)
    possible = brute_force(gang, cluster, free=False)
    verdict = check_gang(gang, capacity)
    if capacity.unknown:
        assert verdict.allowed
    else:
        assert verdict.allowed is possible, verdict.reason
        if not possible:
            assert verdict.reason and verdict.code


@PROPERTY_SETTINGS
@given(cluster=nodes(), gang=gangs())
def test_fits_now_never_denies_what_fits_free_capacity(cluster: list[FakeNode], gang: Gang) -> None:
    if brute_force(gang, cluster, free=True):
        assert fits_now(gang, capacity_of(cluster))


@PROPERTY_SETTINGS
@given(cluster=nodes(), data=st.data())
def test_fits_now_is_exact_for_homogeneous_gangs(
    cluster: list[FakeNode], data: st.DataObject
) -> None:
    gang = near_the_limit(cluster, data)
    capacity = capacity_of(cluster)
    if not capacity.unknown:
        assert fits_now(gang, capacity) is brute_force(gang, cluster, free=True)


@PROPERTY_SETTINGS
@given(cluster=nodes(), gang=gangs(), data=st.data())
def test_verdicts_do_not_depend_on_node_order(
    cluster: list[FakeNode], gang: Gang, data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(cluster))
    assert check_gang(gang, capacity_of(cluster)) == check_gang(gang, capacity_of(shuffled))
    assert fits_now(gang, capacity_of(cluster)) == fits_now(gang, capacity_of(shuffled))


@PROPERTY_SETTINGS
@given(nodes(), gangs(partial=True), st.data())
def test_members_that_arrive_later_count_exactly_like_the_others(
    cluster: list[FakeNode], gang: Gang, data: st.DataObject
) -> None:
    """Steps that start later (issue 11): marking any roles `later` changes no verdict,
    on the empty cluster or on free capacity — the whole gang must fit either way."""
    flags = data.draw(st.lists(st.booleans(), min_size=len(gang.roles), max_size=len(gang.roles)))
    later = replace(
        gang, roles=tuple(replace(r, later=f) for r, f in zip(gang.roles, flags, strict=True))
    )
    capacity = capacity_of(cluster)
    assert check_gang(later, capacity) == check_gang(gang, capacity)
    assert fits_now(later, capacity) == fits_now(gang, capacity)
    # Only the flagged roles' members may be missing at release, counted in members
    # (not roles), worked out here from the flags drawn.
    arriving_later = sum(r.count for r, f in zip(gang.roles, flags, strict=True) if f)
    assert later.needed_before_release == max(1, gang.min_member - arriving_later)


@PROPERTY_SETTINGS
@given(gangs(partial=True))
def test_the_demand_of_a_record_is_that_of_min_member_of_the_cheapest_members(
    gang: Gang,
) -> None:
    """`check`'s `demand`: minMember members, the ones with the fewest GPUs; never more
    than the whole gang's, and all of it when minMember is the size."""
    mine = gang.min_member_demand()
    total = gang.total_demand()
    assert all(mine.get(r, 0) <= a for r, a in total.items())
    assert set(mine) <= set(total)
    if gang.min_member >= gang.size:
        assert mine == {r: a for r, a in total.items() if a}
