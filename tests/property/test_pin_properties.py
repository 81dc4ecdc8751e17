"""The pin, for every shape of pod affinity: the patch only adds what the API server
lets a gated pod gain, the pod may then run on its node alone (and there exactly
when it could before), and the pin reads back as that node and comes off whole."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch  # type: ignore[import-untyped]
from hypothesis import given
from hypothesis import strategies as st

from gangkeeper.policies.assigner.pin import (
    Pin,
    affinity_levels,
    pin_of,
    pin_patch,
    pinned,
    unpinned,
)
from gangkeeper.policies.eligibility import selector_matches
from gangkeeper.policies.names import GATE
from gangkeeper.policies.podspec import placement_of

NODES = ("n1", "n2", "n3")
LABELS = st.dictionaries(st.sampled_from(("pool", "zone")), st.sampled_from(("a", "b")))

EXPRESSION = st.builds(
    lambda key, op, values: {"key": key, "operator": op, "values": values},
    st.sampled_from(("pool", "zone")), st.sampled_from(("In", "NotIn")),
    st.lists(st.sampled_from(("a", "b")), min_size=1, max_size=2, unique=True),
)
#: Fields a user may write (a user's own `metadata.name In` would already pin).
FIELD = st.builds(lambda node: {"key": "metadata.name", "operator": "NotIn", "values": [node]},
                  st.sampled_from(NODES))


@st.composite
def terms(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for _ in range(draw(st.integers(1, 3))):
        term: dict[str, Any] = {}
        for key, item in (("matchExpressions", EXPRESSION), ("matchFields", FIELD)):
            shape = draw(st.sampled_from(("absent", "empty", "some")))
            if shape != "absent":
                term[key] = draw(st.lists(item, min_size=1, max_size=2)) if shape == "some" else []
        out.append(term)
    # A term that can match something: the assigner pins only where the pod may run.
    if all(not t.get("matchExpressions") and not t.get("matchFields") for t in out):
        out.append({"matchExpressions": [draw(EXPRESSION)]})
    return out


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingGates": [{"name": GATE}]}
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(LABELS)
    levels = draw(st.integers(0, 3))
    if levels == 0:
        return spec
    affinity: dict[str, Any] = {}
    spec["affinity"] = affinity
    if draw(st.booleans()):
        affinity["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}
    if levels == 1:
        return spec
    node: dict[str, Any] = {}
    affinity["nodeAffinity"] = node
    if draw(st.booleans()):
        node["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": 1, "preference": {"matchExpressions": [draw(EXPRESSION)]}}]
    if levels == 3:
        node["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": draw(terms())}
    return spec


def _required_terms(spec: dict[str, Any]) -> list[dict[str, Any]] | None:
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    return None if required is None else list(required["nodeSelectorTerms"])


def _only_additions(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """pkg/apis/core/validation `validateNodeAffinityMutation` and
    `validateNodeSelectorTermHasOnlyAdditions`, for a gated pod."""
    old_terms, new_terms = _required_terms(old), _required_terms(new)
    if old_terms is None:
        return True
    if len(new_terms or []) != len(old_terms):
        return False
    for was, now in zip(old_terms, new_terms or [], strict=True):
        if not was.get("matchExpressions") and not was.get("matchFields") and (
                now.get("matchExpressions") or now.get("matchFields")):
            return False
        for key in ("matchExpressions", "matchFields"):
            before, after = was.get(key) or [], now.get(key) or []
            if after[:len(before)] != before:
                return False
    return True


def _lift(spec: dict[str, Any], node: str) -> dict[str, Any]:
    ops = pin_patch([GATE], placement_of(spec), affinity_levels(spec), node)
    out: dict[str, Any] = jsonpatch.apply_patch({"spec": spec}, ops)["spec"]
    return out


@given(specs(), st.sampled_from(NODES))
def test_the_patch_only_adds_what_a_gated_pod_may_gain(spec: dict[str, Any], node: str) -> None:
    after = _lift(copy.deepcopy(spec), node)
    assert _only_additions(after, spec)
    assert after.get("nodeSelector") == spec.get("nodeSelector")
    for part in ("podAntiAffinity", "podAffinity"):
        assert after["affinity"].get(part) == (spec.get("affinity") or {}).get(part)
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    assert after["affinity"]["nodeAffinity"].get(preferred) == (
        (spec.get("affinity") or {}).get("nodeAffinity") or {}).get(preferred)


@given(specs(), st.sampled_from(NODES), LABELS)
def test_the_pinned_pod_may_run_on_its_node_alone(
    spec: dict[str, Any], node: str, labels: dict[str, str]
) -> None:
    before, after = placement_of(spec), placement_of(_lift(copy.deepcopy(spec), node))
    assert after == pinned(before, node)
    for name in NODES:
        allowed = selector_matches(after, name, labels)
        assert allowed == (name == node and selector_matches(before, name, labels))


@given(specs(), st.sampled_from(NODES))
def test_the_pin_reads_back_as_its_node_and_comes_off_whole(
    spec: dict[str, Any], node: str
) -> None:
    before, after = placement_of(spec), placement_of(_lift(copy.deepcopy(spec), node))
    assert pin_of(before) is None
    assert pin_of(after) == Pin(node=node)
    assert unpinned(after) == before
