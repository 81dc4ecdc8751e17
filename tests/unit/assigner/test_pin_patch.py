"""The gate-lifting, node-pinning patch, the pin read back, and the constraints that
forbid a pin."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import pytest

from gangkeeper.policies.assigner import Pin, pin_of, pin_patch, unmodeled
from gangkeeper.policies.assigner.pin import affinity_levels, pinned, unpinned
from gangkeeper.policies.model import NodeSelectorTerm, Placement, Requirement
from gangkeeper.policies.names import GATE
from gangkeeper.policies.podspec import placement_of


def apply(pod: dict[str, object], ops: list[dict[str, object]]) -> dict[str, object]:
    return jsonpatch.apply_patch(pod, ops)  # type: ignore[no-any-return]


def pin(node: str) -> dict[str, object]:
    return {"key": "metadata.name", "operator": "In", "values": [node]}


def lift(spec: dict[str, Any], node: str | None, gates: list[str] | None = None) -> Any:
    """The pod spec after the controller's patch, read as the controller reads it."""
    spec = {"schedulingGates": [{"name": g} for g in (gates or [GATE])], **spec}
    placement = placement_of(spec)
    ops = pin_patch([g["name"] for g in spec["schedulingGates"]], placement,
                    affinity_levels(spec), node)
    return apply({"spec": spec}, ops)["spec"]


def required(spec: dict[str, Any]) -> Any:
    return spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]


def test_without_affinity_one_term_holds_just_the_pin_and_the_gate_goes() -> None:
    out = lift({}, "n1", ["other", GATE])
    assert out == {
        "schedulingGates": [{"name": "other"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [pin("n1")]}]}}},
    }


@pytest.mark.parametrize(
    "affinity",
    [
        {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}},
        {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [
                {"key": "pool", "operator": "In", "values": ["a"]}]}}]}},
    ],
    ids=["pod anti-affinity only", "preferred node affinity only"],
)
def test_a_pod_without_required_terms_keeps_the_rest_of_its_affinity(
    affinity: dict[str, Any]
) -> None:
    out = lift({"affinity": copy.deepcopy(affinity)}, "n1")
    assert required(out) == {"nodeSelectorTerms": [{"matchFields": [pin("n1")]}]}
    del out["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert {k: v for k, v in out["affinity"].items() if v} == affinity


def test_the_pin_joins_every_term_and_keeps_what_each_had() -> None:
    # Terms are ORed: a term without the pin would let the pod go anywhere it allows.
    by_pool = {"key": "pool", "operator": "In", "values": ["a"]}
    not_n9 = {"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [by_pool]},
            {"matchExpressions": [by_pool], "matchFields": [not_n9]},
            {"matchFields": [not_n9]},
            {"matchExpressions": [by_pool], "matchFields": []},
        ]}}}}
    assert required(lift(spec, "n1"))["nodeSelectorTerms"] == [
        {"matchExpressions": [by_pool], "matchFields": [pin("n1")]},
        {"matchExpressions": [by_pool], "matchFields": [not_n9, pin("n1")]},
        {"matchFields": [not_n9, pin("n1")]},
        {"matchExpressions": [by_pool], "matchFields": [pin("n1")]},
    ]


def test_an_empty_term_is_left_as_it_is() -> None:
    # It matches nothing, and the API server lets an empty term gain nothing.
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{}, {"matchExpressions": [
            {"key": "pool", "operator": "Exists"}]}]}}}}
    terms = required(lift(spec, "n1"))["nodeSelectorTerms"]
    assert terms[0] == {}
    assert terms[1]["matchFields"] == [pin("n1")]


def test_the_users_node_selector_is_never_touched() -> None:
    mine = {"pool": "a", "kubernetes.io/hostname": "n1"}
    out = lift({"nodeSelector": dict(mine)}, "n1")
    assert out["nodeSelector"] == mine
    assert required(out) == {"nodeSelectorTerms": [{"matchFields": [pin("n1")]}]}


def test_a_changed_gate_list_fails_the_patch() -> None:
    pod = {"spec": {"schedulingGates": [{"name": GATE}]}}
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        apply(pod, pin_patch(["x", GATE], Placement(), 0, "n1"))


def test_without_a_node_it_is_the_plain_gate_removal() -> None:
    ops = pin_patch([GATE], Placement(), 0, None)
    assert [op["op"] for op in ops] == ["test", "replace"]


def test_the_pin_written_is_read_back_as_that_node() -> None:
    by_pool = Requirement("pool", "In", ("a",))
    for placement in (Placement(), Placement(required_terms=(
            NodeSelectorTerm((by_pool,)), NodeSelectorTerm(match_fields=(
                Requirement("metadata.name", "NotIn", ("n9",)),))))):
        assert pin_of(placement) is None
        assert pin_of(pinned(placement, "n1")) == Pin(node="n1")
        assert unpinned(pinned(placement, "n1")) == placement


def test_a_hostname_pin_of_an_earlier_version_is_still_read() -> None:
    old = Placement(node_selector=(("kubernetes.io/hostname", "host-1"), ("pool", "a")))
    assert pin_of(old) == Pin(hostname="host-1")
    assert unpinned(old) == Placement(node_selector=(("pool", "a"),))


def test_terms_naming_different_nodes_are_no_pin() -> None:
    two = Placement(required_terms=tuple(
        NodeSelectorTerm(match_fields=(Requirement("metadata.name", "In", (n,)),))
        for n in ("n1", "n2")))
    assert pin_of(two) is None


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "zone"}]}}}, "podAntiAffinity"),
        ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "zone"}]}}}, "podAffinity"),
        ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}]}, "DoNotSchedule"),
        ({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}]},
         "hostPort"),
        ({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]}, "data"),
        ({"volumes": [{"name": "scratch", "ephemeral": {}}]}, "scratch"),
        ({"resourceClaims": [{"name": "gpu"}]}, "DRA"),
    ],
)
def test_constraints_the_assigner_does_not_model(spec: dict[str, object], why: str) -> None:
    assert why in unmodeled(spec)


def test_soft_and_harmless_constraints_allow_a_pin() -> None:
    spec = {
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}},
        "topologySpreadConstraints": [{"whenUnsatisfiable": "ScheduleAnyway"}],
        "containers": [{"name": "c", "ports": [{"containerPort": 80}]}],
        "volumes": [{"name": "cfg", "configMap": {"name": "c"}}, {"name": "t", "emptyDir": {}}],
    }
    assert unmodeled(spec) == ""
