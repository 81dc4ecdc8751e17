"""LeaderWorkerSet: each group of `size` pods is its own gang (recognizers/leaderworkerset.py)."""

from __future__ import annotations

from typing import Any

import pytest
from builders.workloads import GPU, Lookup, gang_annotations, leader_worker_set, lws_pod, no_lookup

from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.recognizers.registry import recognize_object, recognize_pod
from gangkeeper.policies.settings.config import Config

CONFIG = Config()


def test_each_group_is_a_gang_of_a_leader_and_size_minus_one_workers() -> None:
    obj = leader_worker_set("vllm", replicas=3, size=4, leader_gpus=2, worker_gpus=8)
    gangs = recognize_object(obj, no_lookup, CONFIG)
    assert [g.name for g in gangs] == ["vllm-0", "vllm-1", "vllm-2"]
    for gang in gangs:
        assert gang.min_member == 4
        assert {r.name: (r.count, dict(r.demand)) for r in gang.roles} == {
            "leader": (1, {GPU: 2}),
            "worker": (3, {GPU: 8}),
        }
        assert gang.source.kind == "LeaderWorkerSet"
        assert gang.source.name == "vllm"


def test_without_a_leader_template_the_leader_uses_the_worker_template() -> None:
    obj = leader_worker_set("lws", replicas=1, size=2, worker_gpus=4, with_leader_template=False)
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert gang.total_demand() == {GPU: 8}


@pytest.mark.parametrize(("replicas", "size"), [(3, 1), (0, 4), (None, None)])
def test_groups_of_one_pod_or_no_groups_are_not_gangs(
    replicas: int | None, size: int | None
) -> None:
    obj = leader_worker_set("lws", replicas=replicas, size=size)
    assert recognize_object(obj, no_lookup, CONFIG) == []


def test_replicas_default_to_one_group() -> None:
    assert len(recognize_object(leader_worker_set(replicas=None), no_lookup, CONFIG)) == 1


def test_an_explicit_gang_name_never_merges_the_groups() -> None:
    obj = leader_worker_set("lws", replicas=2, size=2)
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = (
        gang_annotations("one-for-all", 2)
    )
    names = [g.name for g in recognize_object(obj, no_lookup, CONFIG)]
    assert names == ["lws-0", "lws-1"]


@pytest.mark.parametrize(
    ("group", "worker", "role"), [(0, 0, "leader"), (1, 0, "leader"), (1, 3, "worker")]
)
def test_a_pod_joins_the_gang_of_its_group(group: int, worker: int, role: str) -> None:
    obj = leader_worker_set("vllm", replicas=2, size=4)
    membership = recognize_pod(lws_pod(obj, group, worker), Lookup(obj), CONFIG)
    assert membership is not None
    assert membership.role == role
    assert membership.gang == recognize_object(obj, no_lookup, CONFIG)[group]


def test_a_pod_of_an_unknown_lws_is_sized_by_its_size_annotation() -> None:
    obj = leader_worker_set("vllm", replicas=2, size=4, worker_gpus=8)
    membership = recognize_pod(lws_pod(obj, 1, 2), no_lookup, CONFIG)
    assert membership is not None
    gang = membership.gang
    assert (gang.name, gang.min_member, membership.role) == ("vllm-1", 4, "worker")
    # the other three members are counted but nothing is guessed about their needs
    assert gang.total_demand() == {GPU: 8}


def test_a_pod_of_a_group_beyond_the_replicas_is_not_recognised() -> None:
    obj = leader_worker_set("vllm", replicas=1, size=2)
    assert recognize_pod(lws_pod(obj, 5, 0), Lookup(obj), CONFIG) is None


def test_a_bad_group_index_label_is_an_error_naming_it() -> None:
    obj = leader_worker_set("vllm", replicas=1, size=2)
    member = lws_pod(obj, 0, 1)
    member["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"] = "first"
    with pytest.raises(InvalidObject) as error:
        recognize_pod(member, no_lookup, CONFIG)
    assert error.value.path == 'metadata.labels["leaderworkerset.sigs.k8s.io/group-index"]'


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda o: o["spec"].pop("leaderWorkerTemplate"), "spec.leaderWorkerTemplate"),
        (lambda o: o["spec"].update(replicas=-1), "spec.replicas"),
        (lambda o: o["spec"].update(replicas=10_001), "spec.replicas"),
        (
            lambda o: o["spec"]["leaderWorkerTemplate"].update(size="4"),
            "spec.leaderWorkerTemplate.size",
        ),
        (
            lambda o: o["spec"]["leaderWorkerTemplate"].update(size=10**8),
            "spec.leaderWorkerTemplate.size",
        ),
        (
            lambda o: o["spec"]["leaderWorkerTemplate"].pop("workerTemplate"),
            "spec.leaderWorkerTemplate.workerTemplate",
        ),
        (
            lambda o: o["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0][
                "resources"
            ]["limits"].update({GPU: "0.5"}),
            "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0].resources.limits"
            '["nvidia.com/gpu"]',
        ),
    ],
)
def test_a_malformed_lws_is_an_error_naming_the_field(mutate: Any, path: str) -> None:
    obj = leader_worker_set("lws", replicas=2, size=4)
    mutate(obj)
    with pytest.raises(InvalidObject) as error:
        recognize_object(obj, no_lookup, CONFIG)
    assert error.value.path == path
