"""Pod-based gangs summed over the members seen together (policies/recognizers/pod_gangs.py).

Shapes: Kueue's plain pod group, kubernetes-sigs/kueue v0.17.0
`site/static/examples/pods-kueue/kueue-pod-group.yaml` (label
`kueue.x-k8s.io/pod-group-name`, annotation `kueue.x-k8s.io/pod-group-total-count` on
every pod, pods made with generateName); gangkeeper's own annotated pods (the README's
"Names gangkeeper writes and reads"). Before this, each pod was itself plus minMember - 1
members demanding nothing even with all members present, so both gangs below were
admitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from builders.workloads import gang_annotations, gpu_spec, no_lookup, pod
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies.admission.decision import decide_pod, validate_object
from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.model import KubeObject
from gangkeeper.policies.settings.config import Config

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


def versioned(p: dict[str, Any], uid: str, version: str) -> dict[str, Any]:
    p["metadata"]["uid"], p["metadata"]["resourceVersion"] = uid, version
    return p


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.sampled_from((1, 2, 4, 8)), min_size=1, max_size=12),
    changed=st.sets(st.integers(min_value=0, max_value=11)),
)
def test_the_servers_sibling_memo_never_changes_a_decision(
    sizes: list[int], changed: set[int]
) -> None:
    """With the server's memos (each sibling read once per version) and without (read
    afresh every time), every member of a pod-based gang gets the same gang."""
    from gangkeeper.policies.admission.decision import Memos

    capacity = fleet(8, 8, 8, 8)
    pods = [versioned(annotated_pod(f"w{i}", g, len(sizes)), f"u{i}", "1")
            for i, g in enumerate(sizes)]
    memos = Memos()
    for _ in range(2):  # the second round finds every sibling in the memo ...
        for p in pods:
            fresh = validate_object(p, capacity=capacity, lookup=no_lookup,
                                    config=CONFIG, siblings=siblings_of(pods))
            memoised = validate_object(p, capacity=capacity, lookup=no_lookup, config=CONFIG,
                                       siblings=siblings_of(pods), memos=memos)
            assert [d.gang for d in memoised] == [d.gang for d in fresh]
            assert [d.verdict for d in memoised] == [d.verdict for d in fresh]
        # ... unless it changed: a new version (here another size) is read again.
        for i in changed & set(range(len(pods))):
            pods[i] = versioned(annotated_pod(f"w{i}", 16 // sizes[i], len(sizes)), f"u{i}", "2")


def test_a_siblings_version_is_recognised_once_across_admissions() -> None:
    """A 1,000-pod gang made every admission recognise every member seen so far (over
    300 ms an admission at the end; the API server's webhook calls timed out)."""
    from gangkeeper.policies.admission.decision import Memos
    from gangkeeper.policies.recognizers import registry

    pods = [versioned(annotated_pod(f"w{i}", 1, 50), f"u{i}", "1") for i in range(50)]
    calls = 0
    real = registry.AnnotationsRecognizer.recognize_pod

    def counting(self: Any, *args: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(self, *args)

    memos = Memos()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry.AnnotationsRecognizer, "recognize_pod", counting)
        for p in pods:
            validate_object(p, capacity=fleet(8, 8, 8, 8, 8, 8, 8), lookup=no_lookup,
                            config=CONFIG, siblings=siblings_of(pods), memos=memos)
    # Each admission recognises its own pod once; each sibling version once in all.
    assert calls <= 2 * len(pods), calls


def cpu_pod(name: str, gpus: int, cpu: str, min_member: int = 2) -> dict[str, Any]:
    spec = gpu_spec(gpus)
    spec["containers"][0]["resources"]["requests"] = {"cpu": cpu}
    return pod(name, spec, annotations=gang_annotations("g", min_member))


def cpu_fleet(*nodes: tuple[int, str]) -> Capacity:
    return Capacity.from_nodes(
        [
            {"metadata": {"name": f"n{i}"}, "status": {"allocatable": {GPU: str(g), "cpu": c}}}
            for i, (g, c) in enumerate(nodes)
        ],
        CONFIG,
    )


def test_summed_members_keep_their_cpu_requests_and_a_gang_that_cannot_get_them_is_refused(
) -> None:
    """Two 4-GPU pods asking 48 cores each, on two nodes of 8 GPUs and 32 cores: GPUs
    fit, cpu never does. Before, summing the seen members dropped every role's cpu and
    memory requests, so with both members seen the gang was admitted and waited for
    ever; alone, each pod was (rightly) refused."""
    pods = [cpu_pod("a", 4, "48"), cpu_pod("b", 4, "48")]
    capacity = cpu_fleet((8, "32"), (8, "32"))
    alone = verdict_for(pods[0], [], capacity)
    assert not alone.verdict.allowed, alone.verdict.reason
    both = verdict_for(pods[1], pods[:1], capacity)
    assert {r.requests.get("cpu") for r in both.gang.roles} == {48_000}
    assert not both.verdict.allowed, both.verdict.reason
    assert "cpu" in both.verdict.reason


def test_members_that_differ_only_in_cpu_are_two_roles() -> None:
    pods = [cpu_pod("a", 4, "2", min_member=3), cpu_pod("b", 4, "2", min_member=3),
            cpu_pod("c", 4, "16", min_member=3)]
    decision = verdict_for(pods[0], pods[1:], cpu_fleet((8, "32"), (8, "32")))
    shapes = sorted((r.count, dict(r.requests)) for r in decision.gang.roles)
    assert shapes == [(1, {"cpu": 16_000}), (2, {"cpu": 2_000})]
    assert decision.verdict.allowed, decision.verdict.reason


@settings(max_examples=80, deadline=None)
@given(
    members=st.lists(st.tuples(st.integers(min_value=0, max_value=8),
                               st.sampled_from(("0", "500m", "2", "16", "48"))),
                     min_size=1, max_size=7),
    min_member=st.integers(min_value=1, max_value=9),
)
def test_summing_keeps_what_every_seen_member_asks(
    members: list[tuple[int, str]], min_member: int
) -> None:
    """Whatever the mix, the summed gang asks exactly what its seen members ask, GPUs
    and cpu alike: no request is dropped or invented by grouping members into roles."""
    pods = [cpu_pod(f"p{i}", g, c, min_member=min_member) for i, (g, c) in enumerate(members)]
    decision = verdict_for(pods[-1], pods[:-1], cpu_fleet((8, "64")))
    roles = decision.gang.roles
    cpu = {"0": 0, "500m": 500, "2": 2_000, "16": 16_000, "48": 48_000}
    assert sum(r.count * r.requests.get("cpu", 0) for r in roles) == sum(
        cpu[c] for _, c in members)
    assert sum(r.count * r.demand.get(GPU, 0) for r in roles) == sum(g for g, _ in members)
    assert decision.gang.size == max(len(members), min_member)
