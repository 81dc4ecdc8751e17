"""Pod-based gangs summed over the members seen together (policies/pod_gangs.py).

Shapes: Kueue's plain pod group, kubernetes-sigs/kueue v0.17.0
`site/static/examples/pods-kueue/kueue-pod-group.yaml` (label
`kueue.x-k8s.io/pod-group-name`, annotation `kueue.x-k8s.io/pod-group-total-count` on
every pod, pods made with generateName); gangkeeper's own annotated pods (DESIGN.md
contracts). Before this, each pod was itself plus minMember - 1 members demanding
nothing even with all members present, so both gangs below were admitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from builders.workloads import gang_annotations, gpu_spec, no_lookup, pod
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies.capacity import Capacity
from gangkeeper.policies.config import Config
from gangkeeper.policies.decision import decide_pod, validate_object
from gangkeeper.policies.model import KubeObject

GPU = "nvidia.com/gpu"
CONFIG = Config()
GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"


def fleet(*gpus: int) -> Capacity:
    return Capacity.from_nodes(
        [
            {"metadata": {"name": f"n{i}"}, "status": {"allocatable": {GPU: str(g)}}}
            for i, g in enumerate(gpus)
        ],
        CONFIG,
    )


def kueue_pod(name: str, gpus: int, total: int = 5) -> dict[str, Any]:
    return pod(name, gpu_spec(gpus), labels={GROUP: "sweep"}, annotations={TOTAL: str(total)})


def annotated_pod(name: str, gpus: int, min_member: int = 5, gang: str = "g") -> dict[str, Any]:
    return pod(name, gpu_spec(gpus), annotations=gang_annotations(gang, min_member))


def siblings_of(pods: Sequence[KubeObject]) -> Any:
    """A PodsLookup over `pods`, as `check` builds it from its files."""

    def lookup(namespace: str, name: str) -> list[KubeObject]:
        found = []
        for p in pods:
            meta = p["metadata"]
            named = meta.get("annotations", {}).get("gangkeeper.io/gang-name") == name or (
                meta.get("labels", {}).get(GROUP) == name
            )
            if meta.get("namespace", "default") == namespace and named:
                found.append(p)
        return found

    return lookup


def verdict_for(member: KubeObject, others: Sequence[KubeObject], capacity: Capacity) -> Any:
    [decision] = validate_object(
        member,
        capacity=capacity,
        lookup=no_lookup,
        config=CONFIG,
        siblings=siblings_of([member, *others]),
    )
    return decision


def test_five_8_gpu_pods_of_one_kueue_group_on_32_gpus_are_rejected() -> None:
    pods = [kueue_pod(f"p{i}", 8) for i in range(5)]
    decision = verdict_for(pods[0], pods[1:], fleet(8, 8, 8, 8))
    assert not decision.verdict.allowed
    assert decision.gang.total_demand() == {GPU: 40}
    assert "40" in decision.verdict.reason and "32" in decision.verdict.reason
    assert "all 5 members seen: 40 nvidia.com/gpu" in decision.verdict.reason


def test_five_3_gpu_annotated_pods_where_four_pack_are_rejected() -> None:
    pods = [annotated_pod(f"p{i}", 3) for i in range(5)]
    decision = verdict_for(pods[4], pods[:4], fleet(8, 8))
    assert not decision.verdict.allowed
    assert decision.verdict.code == "packing"
    assert "fit only 4" in decision.verdict.reason
    assert "all 5 members seen: 15 nvidia.com/gpu" in decision.verdict.reason


def test_a_pod_alone_is_admitted_with_a_warning_giving_the_numbers() -> None:
    """Members not seen demand nothing (no rejection on a guess), but five members like
    this one could never be packed onto two 8-GPU nodes: the answer says so."""
    decision = verdict_for(annotated_pod("p0", 3), [], fleet(8, 8))
    assert decision.verdict.allowed
    [warning] = decision.verdict.warnings
    assert warning == (
        "gang default/g: 5 members like the 1 seen (3 nvidia.com/gpu each) cannot be "
        "packed, at most 4 fit"
    )
    assert len(warning) <= 120


@pytest.mark.parametrize("seen", [1, 2, 3, 4])
def test_each_of_the_first_four_is_admitted_with_the_warning(seen: int) -> None:
    pods = [annotated_pod(f"p{i}", 3) for i in range(seen)]
    decision = decide_pod(
        pods[-1],
        namespace="default",
        capacity=fleet(8, 8),
        lookup=no_lookup,
        config=CONFIG,
        siblings=siblings_of(pods),
    )
    assert decision.verdict.allowed
    assert decision.patched is not None  # gated and gang-keyed as before
    assert decision.membership is not None
    assert decision.membership.gang.min_member == 5
    assert decision.membership.gang.total_demand() == {GPU: 3 * seen}
    assert any(f"like the {seen} seen" in w for w in decision.verdict.warnings)


def test_members_that_could_pack_get_no_warning() -> None:
    decision = verdict_for(annotated_pod("p0", 2, min_member=4), [], fleet(8))
    assert decision.verdict.allowed
    assert decision.verdict.warnings == ()


def test_mixed_seen_members_are_summed_by_shape() -> None:
    pods = [annotated_pod("a", 4), annotated_pod("b", 4), annotated_pod("c", 1)]
    decision = verdict_for(pods[0], pods[1:], fleet(8, 8))
    gang = decision.gang
    assert sorted((r.name, r.count, dict(r.demand)) for r in gang.roles) == [
        ("member", 2, {GPU: 4}),
        ("member-2", 1, {GPU: 1}),
        ("unseen", 2, {}),
    ]


@pytest.mark.parametrize(
    "other",
    [
        annotated_pod("x", 8, gang="another"),  # another gang
        annotated_pod("y", 8) | {"status": {"phase": "Succeeded"}},  # finished
        pod("z", gpu_spec(8), annotations={"gangkeeper.io/gang-name": "g"}),  # no min-member
        annotated_pod("p0", 8),  # the pod under review itself (same name)
    ],
    ids=["other-gang", "finished", "unreadable", "itself"],
)
def test_pods_that_are_not_other_members_are_not_summed(other: dict[str, Any]) -> None:
    member = annotated_pod("p0", 3)
    decision = verdict_for(member, [other], fleet(8, 8))
    assert decision.gang.total_demand() == {GPU: 3}


def test_without_a_siblings_lookup_a_pod_is_itself_plus_unseen_members() -> None:
    [decision] = validate_object(
        annotated_pod("p0", 3), capacity=fleet(8, 8), lookup=no_lookup, config=CONFIG
    )
    assert decision.gang.total_demand() == {GPU: 3}


@settings(max_examples=60, deadline=None)
@given(
    gpus=st.lists(st.integers(min_value=0, max_value=8), min_size=1, max_size=7),
    min_member=st.integers(min_value=2, max_value=8),
    nodes=st.lists(st.integers(min_value=1, max_value=8), min_size=1, max_size=4),
)
def test_seeing_more_members_never_turns_a_rejection_into_an_admission(
    gpus: list[int], min_member: int, nodes: list[int]
) -> None:
    """Summing is monotone up to minMember: each member seen replaces an unseen one
    that demanded nothing, so a gang rejected with k members seen stays rejected with
    more. (Beyond minMember, more members seen are more choice.)"""
    capacity = fleet(*nodes)
    pods = [annotated_pod(f"p{i}", g, min_member=min_member) for i, g in enumerate(gpus)]
    rejected = False
    for seen in range(1, len(pods) + 1):
        decision = verdict_for(pods[seen - 1], pods[: seen - 1], capacity)
        assert decision.gang.size == max(seen, min_member)
        if rejected and seen <= min_member:
            assert not decision.verdict.allowed
        rejected = not decision.verdict.allowed
