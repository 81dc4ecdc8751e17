"""`topology-preferred` packing against brute force on random small fleets (issue 12).

For random fleets of a few domains (and a node or two without the label) and small
gangs:
(a) whenever brute force finds an assignment inside the domains, `fewest_domains`
finds one, and it uses exactly as few domains as the best brute-force assignment;
(b) every assignment it returns is valid (each member eligible on its node, no node
over any resource) and uses only labelled nodes;
(c) past its combination budget (the greedy fallback) it still returns only valid
assignments, and finds one whenever brute force does.
"""

from __future__ import annotations

import pytest
from builders.assignments import valid as valid_assignment
from builders.assignments import valid_choices
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangkeeper.policies.assigner import Assignment, Member, NodeView, NoRoom, fewest_domains
from gangkeeper.policies.assigner.domains import domains_used
from gangkeeper.policies.model import Placement

pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)

KEY = "example.com/rack"
RESOURCES = ("nvidia.com/gpu", "cpu", "pods")


@st.composite
def fleets(draw: st.DrawFn) -> list[NodeView]:
    out: list[NodeView] = []
    for d in range(draw(st.integers(1, 4))):
        for _ in range(draw(st.integers(1, 2))):
            out.append(node(draw, len(out), {KEY: f"r{d}"}))
    for _ in range(draw(st.integers(0, 1))):
        out.append(node(draw, len(out), {}))  # in no domain
    return out


def node(draw: st.DrawFn, index: int, labels: dict[str, str]) -> NodeView:
    pool = draw(st.sampled_from(["a", "b"]))
    return NodeView(
        name=f"n{index}",
        labels={**labels, "pool": pool},
        taints=(),
        free={r: draw(st.integers(0, 8)) for r in RESOURCES},
        ready=draw(st.integers(0, 6)) > 0,
    )


@st.composite
def gangs(draw: st.DrawFn) -> list[Member]:
    out = []
    for i in range(draw(st.integers(1, 4))):
        selector = draw(st.sampled_from([(), (), (("pool", "a"),)]))
        out.append(
            Member(
                f"m{i}",
                {r: draw(st.integers(0, 5)) for r in RESOURCES},
                Placement(node_selector=selector),
            )
        )
    return out


def fewest_by_brute_force(gang: list[Member], fleet: list[NodeView]) -> int | None:
    """The fewest domains any valid assignment on labelled nodes uses (None: none)."""
    labelled = [n for n in fleet if KEY in n.labels]
    used = [len({labelled[i].labels[KEY] for i in choice})
            for choice in valid_choices(gang, labelled)]
    return min(used, default=None)


def valid(result: Assignment, gang: list[Member], fleet: list[NodeView]) -> bool:
    """A valid assignment on the nodes that carry the domain label."""
    return valid_assignment(result, gang, [n for n in fleet if KEY in n.labels])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gangs(), fleets())
def test_uses_as_few_domains_as_brute_force_and_only_valid_assignments(
    gang: list[Member], fleet: list[NodeView]
) -> None:
    result = fewest_domains(gang, fleet, KEY)
    best = fewest_by_brute_force(gang, fleet)
    if best is not None:
        assert isinstance(result, Assignment)
        assert domains_used(result, fleet, KEY) == best
    if isinstance(result, Assignment):
        assert valid(result, gang, fleet)
    else:
        assert isinstance(result, NoRoom)
        assert best is None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gangs(), fleets())
def test_past_its_budget_it_still_finds_valid_assignments(
    gang: list[Member], fleet: list[NodeView]
) -> None:
    result = fewest_domains(gang, fleet, KEY, budget=0)
    if fewest_by_brute_force(gang, fleet) is not None:
        assert isinstance(result, Assignment)
    if isinstance(result, Assignment):
        assert valid(result, gang, fleet)


def test_a_gang_that_fits_two_racks_is_not_spread_over_three() -> None:
    # Three 4-GPU members; rack r0 has one node with 8 free, racks r1 and r2 one node
    # with 4 free each. No rack holds the gang; r0 + r1 does. Best fit alone takes the
    # tightest nodes first (r1, r2) and ends on three racks, which the behaviour
    # before ("one domain, else every node") did.
    fleet = [
        NodeView(name, {KEY: rack}, (), {"nvidia.com/gpu": gpus})
        for name, rack, gpus in (("a", "r0", 8), ("b", "r1", 4), ("c", "r2", 4))
    ]
    gang = [Member(f"m{i}", {"nvidia.com/gpu": 4}) for i in range(3)]
    result = fewest_domains(gang, fleet, KEY)
    assert isinstance(result, Assignment)
    assert domains_used(result, fleet, KEY) == 2
    assert sorted(result.nodes.values()) == ["a", "a", "b"]  # fullest first: r1 before r2


@st.composite
def tight(draw: st.DrawFn) -> tuple[list[Member], list[NodeView]]:
    """GPUs only, a node or two per rack: where the order of choices decides."""
    fleet = [
        NodeView(f"n{d}{i}", {KEY: f"r{d}"}, (), {"nvidia.com/gpu": draw(st.integers(1, 8))})
        for d in range(draw(st.integers(1, 4))) for i in range(draw(st.integers(1, 2)))
    ]
    gang = [Member(f"m{i}", {"nvidia.com/gpu": draw(st.integers(1, 6))})
            for i in range(draw(st.integers(1, 4)))]
    return gang, fleet


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tight())
def test_tight_gangs_use_as_few_domains_as_brute_force(
    case: tuple[list[Member], list[NodeView]],
) -> None:
    gang, fleet = case
    result = fewest_domains(gang, fleet, KEY)
    best = fewest_by_brute_force(gang, fleet)
    if best is None:
        assert isinstance(result, NoRoom)
        return
    assert isinstance(result, Assignment)
    assert valid(result, gang, fleet)
    assert domains_used(result, fleet, KEY) == best
