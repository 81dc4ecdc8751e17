"""The assigner against brute force on random small fleets and gangs.

(a) whenever brute force (every member on every node, no shapes, no bounds) finds an
assignment, the assigner finds one;
(b) every assignment it returns is valid: each member eligible on its node (Ready,
uncordoned, the scheduler filters) and no node over any resource.
"""

from __future__ import annotations

import pytest
from builders.assignments import valid, valid_choices
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangkeeper.policies.assigner import Assignment, Member, NodeView, NoRoom, assign
from gangkeeper.policies.cluster.node_facts import UNSCHEDULABLE_TAINT
from gangkeeper.policies.model import Placement, Taint, Toleration

pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)

RESOURCES = ("nvidia.com/gpu", "cpu", "memory", "pods")


@st.composite
def nodes(draw: st.DrawFn) -> list[NodeView]:
    count = draw(st.integers(1, 3))
    out = []
    for i in range(count):
        cordoned = draw(st.integers(0, 4)) == 0
        taints: tuple[Taint, ...] = ()
        if draw(st.integers(0, 4)) == 0:
            taints = (Taint("dedicated", "x", draw(st.sampled_from(["NoSchedule", "NoExecute"]))),)
        if cordoned:
            taints = (*taints, UNSCHEDULABLE_TAINT)
        out.append(
            NodeView(
                name=f"n{i}",
                labels={"pool": draw(st.sampled_from(["a", "b"]))},
                taints=taints,
                free={r: draw(st.integers(0, 8)) for r in RESOURCES},
                ready=draw(st.integers(0, 5)) > 0,
                unschedulable=cordoned,
            )
        )
    return out


@st.composite
def members(draw: st.DrawFn) -> list[Member]:
    count = draw(st.integers(1, 5))
    out = []
    for i in range(count):
        selector = draw(st.sampled_from([(), (("pool", "a"),), (("pool", "b"),)]))
        tolerations = (Toleration("dedicated", "Exists"),) if draw(st.booleans()) else ()
        out.append(
            Member(
                name=f"m{i}",
                requests={r: draw(st.integers(0, 5)) for r in RESOURCES},
                placement=Placement(node_selector=selector, tolerations=tolerations),
            )
        )
    return out


def brute_force(gang: list[Member], fleet: list[NodeView]) -> bool:
    return next(valid_choices(gang, fleet), None) is not None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(members(), nodes())
def test_finds_what_brute_force_finds_and_only_valid_assignments(
    gang: list[Member], fleet: list[NodeView]
) -> None:
    result = assign(gang, fleet)
    if brute_force(gang, fleet):
        assert isinstance(result, Assignment)
    if isinstance(result, Assignment):
        assert valid(result, gang, fleet)
    else:
        assert isinstance(result, NoRoom)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(members(), nodes())
def test_best_fit_alone_returns_only_valid_assignments(
    gang: list[Member], fleet: list[NodeView]
) -> None:
    result = assign(gang, fleet, exact_members=0)
    if isinstance(result, Assignment):
        assert valid(result, gang, fleet)


@st.composite
def packing_cases(draw: st.DrawFn) -> tuple[list[Member], list[NodeView]]:
    """GPUs only, tight: where the order of choices decides (best fit alone fails)."""
    fleet = [
        NodeView(
            name=f"n{i}", labels={}, taints=(),
            free={"nvidia.com/gpu": draw(st.integers(1, 8))},
        )
        for i in range(draw(st.integers(1, 3)))
    ]
    gang = [
        Member(f"m{i}", {"nvidia.com/gpu": draw(st.integers(1, 6))})
        for i in range(draw(st.integers(1, 6)))
    ]
    return gang, fleet


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(packing_cases())
def test_tight_packings_are_found_whenever_they_exist(
    case: tuple[list[Member], list[NodeView]],
) -> None:
    gang, fleet = case
    result = assign(gang, fleet)
    if brute_force(gang, fleet):
        assert isinstance(result, Assignment)
        assert valid(result, gang, fleet)
    else:
        assert isinstance(result, NoRoom)
