"""Node eligibility follows kube-scheduler's NodeAffinity and TaintToleration filters."""

from __future__ import annotations

import pytest

from gangkeeper.policies.eligibility import (
    named_nodes,
    node_eligible,
    requirement_matches,
    tolerates,
    tolerates_all,
    uses_node_identity,
)
from gangkeeper.policies.model import (
    NodeSelectorTerm,
    Placement,
    Requirement,
    Taint,
    Toleration,
)

LABELS = {"gpu": "a100", "zone": "z1", "gen": "8", "odd": "eight"}


def req(key: str, operator: str, *values: str) -> Requirement:
    return Requirement(key=key, operator=operator, values=values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (req("gpu", "In", "a100", "h100"), True),
        (req("gpu", "In", "h100"), False),
        (req("missing", "In", "x"), False),
        (req("gpu", "NotIn", "h100"), True),
        (req("gpu", "NotIn", "a100"), False),
        (req("missing", "NotIn", "x"), True),
        (req("gpu", "Exists"), True),
        (req("missing", "Exists"), False),
        (req("gpu", "DoesNotExist"), False),
        (req("missing", "DoesNotExist"), True),
        (req("gen", "Gt", "7"), True),
        (req("gen", "Gt", "8"), False),
        (req("gen", "Lt", "9"), True),
        (req("gen", "Lt", "8"), False),
        (req("gen", "Gt", "-1"), True),
        (req("gen", "Gt", "+7"), True),
        (req("odd", "Gt", "1"), False),
        (req("missing", "Gt", "1"), False),
        (req("missing", "Lt", "1"), False),
        (req("gen", "Gt", "seven"), False),
    ],
    ids=lambda v: str(v) if isinstance(v, bool) else f"{v.key} {v.operator} {list(v.values)}",
)
def test_match_expression_operators_follow_the_label_selector(
    requirement: Requirement, expected: bool
) -> None:
    assert requirement_matches(requirement, LABELS) is expected


@pytest.mark.parametrize("label", [" 8", "8 ", "1_0", "0x8", "", "99999999999999999999"])
def test_gt_needs_a_go_int64_label_not_python_int_syntax(label: str) -> None:
    assert not requirement_matches(req("n", "Gt", "0"), {"n": label})


def eligible(
    placement: Placement,
    name: str = "node-1",
    labels: dict[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
) -> bool:
    return node_eligible(
        placement, node_name=name, labels=LABELS if labels is None else labels, taints=taints
    )


def test_node_selector_needs_every_pair() -> None:
    assert eligible(Placement(node_selector=(("gpu", "a100"), ("zone", "z1"))))
    assert not eligible(Placement(node_selector=(("gpu", "a100"), ("zone", "z2"))))


def test_required_terms_are_ored_and_expressions_anded() -> None:
    both = NodeSelectorTerm((req("gpu", "In", "a100"), req("zone", "In", "z2")))
    either = NodeSelectorTerm((req("zone", "In", "z1"),))
    assert not eligible(Placement(required_terms=(both,)))
    assert eligible(Placement(required_terms=(both, either)))


def test_an_empty_term_matches_no_node() -> None:
    assert not eligible(Placement(required_terms=(NodeSelectorTerm(),)))
    assert eligible(
        Placement(required_terms=(NodeSelectorTerm(), NodeSelectorTerm((req("gpu", "Exists"),))))
    )


def test_node_selector_and_affinity_must_both_hold() -> None:
    term = NodeSelectorTerm((req("gpu", "Exists"),))
    assert not eligible(Placement(node_selector=(("zone", "z9"),), required_terms=(term,)))


@pytest.mark.parametrize(
    ("fields", "name", "expected"),
    [
        ((req("metadata.name", "In", "node-1"),), "node-1", True),
        ((req("metadata.name", "In", "node-1"),), "node-2", False),
        ((req("metadata.name", "NotIn", "node-1"),), "node-2", True),
        ((req("metadata.name", "NotIn", "node-1"),), "node-1", False),
        # The scheduler's field selector takes exactly one value; more is a parse error.
        ((req("metadata.name", "In", "node-1", "node-2"),), "node-1", False),
    ],
)
def test_match_fields_select_by_node_name(
    fields: tuple[Requirement, ...], name: str, expected: bool
) -> None:
    assert eligible(Placement(required_terms=(NodeSelectorTerm(match_fields=fields),)), name) is (
        expected
    )


def test_a_malformed_requirement_makes_only_its_term_fail() -> None:
    broken = NodeSelectorTerm((req("gpu", "In"),))  # In without values
    good = NodeSelectorTerm((req("gpu", "In", "a100"),))
    assert not eligible(Placement(required_terms=(broken,)))
    assert eligible(Placement(required_terms=(broken, good)))


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration(key="gpu", operator="Exists"), Taint("gpu", "x", "NoSchedule"), True),
        (Toleration(key="gpu", value="x"), Taint("gpu", "x", "NoSchedule"), True),
        (Toleration(key="gpu", value="y"), Taint("gpu", "x", "NoSchedule"), False),
        (Toleration(key="gpu", value="x", effect="NoExecute"), Taint("gpu", "x"), False),
        (Toleration(operator="Exists"), Taint("anything", "v", "NoExecute"), True),
        (Toleration(key="other", operator="Exists"), Taint("gpu", "x"), False),
        (Toleration(operator="Exists", effect="NoSchedule"), Taint("k", "", "NoExecute"), False),
    ],
)
def test_toleration_matches_taint_like_the_api_types(
    toleration: Toleration, taint: Taint, expected: bool
) -> None:
    assert tolerates(toleration, taint) is expected


def test_untolerated_no_schedule_and_no_execute_taints_exclude_a_node() -> None:
    assert not eligible(Placement(), taints=(Taint("gpu", "x", "NoSchedule"),))
    assert not eligible(Placement(), taints=(Taint("gpu", "x", "NoExecute"),))


def test_prefer_no_schedule_never_excludes() -> None:
    assert eligible(Placement(), taints=(Taint("gpu", "x", "PreferNoSchedule"),))


def test_every_excluding_taint_needs_a_toleration() -> None:
    taints = (Taint("a", "", "NoSchedule"), Taint("b", "", "NoExecute"))
    assert not tolerates_all((Toleration(key="a", operator="Exists"),), taints)
    assert tolerates_all(
        (Toleration(key="a", operator="Exists"), Toleration(key="b", operator="Exists")), taints
    )


@pytest.mark.parametrize(
    ("placement", "expected"),
    [
        (Placement(), False),
        (Placement(node_selector=(("gpu", "a100"),)), False),
        (Placement(node_selector=(("kubernetes.io/hostname", "n1"),)), True),
        (
            Placement(
                required_terms=(NodeSelectorTerm(match_fields=(req("metadata.name", "In", "n1"),)),)
            ),
            True,
        ),
        (
            Placement(
                required_terms=(NodeSelectorTerm((req("kubernetes.io/hostname", "NotIn", "n1"),)),)
            ),
            True,
        ),
    ],
)
def test_placements_reading_node_identity_are_detected(
    placement: Placement, expected: bool
) -> None:
    assert uses_node_identity(placement, ("kubernetes.io/hostname",)) is expected


def _named(*fields: Requirement, expressions: tuple[Requirement, ...] = ()) -> NodeSelectorTerm:
    return NodeSelectorTerm(expressions, fields)


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        ((), None),
        ((_named(req("metadata.name", "In", "n1")),), {"n1"}),
        # Terms are ORed: the union; a term that names no node leaves every node open.
        ((_named(req("metadata.name", "In", "n1")), _named(req("metadata.name", "In", "n2"))),
         {"n1", "n2"}),
        ((_named(req("metadata.name", "In", "n1")), _named(expressions=(req("gpu", "Exists"),))),
         None),
        ((_named(req("metadata.name", "NotIn", "n1")),), None),
        # Requirements in a term are ANDed: the intersection; an empty term matches nothing.
        ((_named(req("metadata.name", "In", "n1"), req("metadata.name", "In", "n2")),), set()),
        ((NodeSelectorTerm(), _named(req("metadata.name", "In", "n1"))), {"n1"}),
    ],
)
def test_nodes_named_by_metadata_name_are_the_only_candidates(
    terms: tuple[NodeSelectorTerm, ...], expected: set[str] | None
) -> None:
    # kube-scheduler's NodeAffinity PreFilter: the set filtering is limited to.
    named = named_nodes(Placement(required_terms=terms))
    assert named == (None if expected is None else frozenset(expected))
    if named is not None:
        for node in ("n1", "n2", "n3"):
            if node not in named:
                assert not node_eligible(Placement(required_terms=terms), node_name=node,
                                         labels=LABELS, taints=())
