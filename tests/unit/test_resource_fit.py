"""Admission counts cpu and memory like placement: a gang whose members can never get
what they ask on the nodes they may use is refused, with numbers."""

from __future__ import annotations

from typing import Any

from gangkeeper.policies import validate_object
from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.fit.feasibility import check_gang
from gangkeeper.policies.model import Gang, Placement, Role, Source
from gangkeeper.policies.settings.config import load_config


def node(name: str, cpu: str | None = "128", memory: str | None = "512Gi", pool: str = "a") -> Any:
    allocatable = {"nvidia.com/gpu": "8", "pods": "110"}
    if cpu is not None:
        allocatable["cpu"] = cpu
    if memory is not None:
        allocatable["memory"] = memory
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "pool": pool}},
        "status": {"allocatable": allocatable},
    }


def gang(count: int, cpu: int, *, memory: int = 0, min_member: int | None = None,
         selector: tuple[tuple[str, str], ...] = ()) -> Gang:
    requests = {"cpu": cpu * 1000, **({"memory": memory * 2**30} if memory else {})}
    role = Role("worker", count, {"nvidia.com/gpu": 4}, Placement(node_selector=selector),
                requests=requests)
    return Gang("team", "llm", count if min_member is None else min_member, (role,),
                Source("batch/v1", "Job", "team", "llm"))


def test_a_member_asking_more_cpu_than_any_node_offers_is_refused_with_numbers() -> None:
    capacity = Capacity.from_nodes([node("n1"), node("n2")])
    verdict = check_gang(gang(2, 200), capacity)
    assert not verdict.allowed and verdict.code == "member-too-big"
    assert "needs 4 nvidia.com/gpu with 200 cpu on one node" in verdict.reason
    assert "largest offer 128 cpu" in verdict.reason


def test_memory_counts_too() -> None:
    capacity = Capacity.from_nodes([node("n1"), node("n2")])
    verdict = check_gang(gang(2, 8, memory=600), capacity)
    assert not verdict.allowed and "600Gi memory" in verdict.reason


def test_a_gang_needing_more_cpu_than_its_nodes_offer_in_all_is_refused() -> None:
    capacity = Capacity.from_nodes([node("n1"), node("n2")])
    verdict = check_gang(gang(4, 100), capacity)  # 4 x 4 GPUs fit; 400 cpu > 256
    assert not verdict.allowed and verdict.code == "total-demand"
    assert "needs 400 cpu in all; the 2 nodes it may use offer at most 256 cpu" in verdict.reason


def test_only_the_nodes_the_gang_may_use_count() -> None:
    capacity = Capacity.from_nodes([node("n1", cpu="16"), node("n2", cpu="256", pool="b")])
    assert not check_gang(gang(1, 32, selector=(("pool", "a"),)), capacity).allowed
    assert check_gang(gang(1, 32), capacity).allowed


def test_what_cannot_be_proven_is_admitted() -> None:
    silent = Capacity.from_nodes([node("n1", cpu=None), node("n2", cpu=None)])
    assert check_gang(gang(2, 200), silent).allowed  # nodes report no cpu
    capacity = Capacity.from_nodes([node("n1"), node("n2")])
    assert check_gang(gang(4, 100, min_member=2), capacity).allowed  # which two is unknown
    assert check_gang(gang(2, 100), capacity).allowed


def test_a_pool_template_counts_with_its_cpu_in_cores() -> None:
    config = load_config({"pools": [{"name": "big", "maxCount": 2, "allocatable": {
        "nvidia.com/gpu": 8, "cpu": "256"}}]})
    capacity = Capacity.from_nodes([node("n1")], config)
    assert check_gang(gang(2, 200), capacity).allowed  # the pool's nodes hold it
    assert not check_gang(gang(2, 300), capacity).allowed


def test_a_job_whose_workers_ask_200_cores_is_refused_at_admission() -> None:
    container = {"name": "t", "image": "x", "resources": {
        "limits": {"nvidia.com/gpu": "4"}, "requests": {"cpu": "200", "nvidia.com/gpu": "4"}}}
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "llm", "namespace": "team"},
        "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }
    capacity = Capacity.from_nodes([node("n1"), node("n2")])
    (decision,) = validate_object(
        job, capacity=capacity, lookup=lambda *_: None, config=capacity.config
    )
    assert not decision.verdict.allowed
    assert "200 cpu" in decision.verdict.reason
