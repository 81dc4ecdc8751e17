"""Admission counts cpu and memory like placement: a gang whose members can never get
what they ask on the nodes they may use is refused, with numbers."""

from __future__ import annotations

from typing import Any

from gangkeeper.policies import decide_pod, validate_object
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


# -- gangs without GPUs (issue 24): refused by what they ask, on every node ------------


def plain(name: str, memory: str = "300Mi", cpu: str = "8", **labels: str) -> Any:
    """A node without GPUs."""
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


def cpu_pod(memory: str, min_member: int = 4) -> dict[str, Any]:
    """One member of a gang keyed by gangkeeper's annotations, asking memory only."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "etl-0", "namespace": "team", "annotations": {
            "gangkeeper.io/gang-name": "etl", "gangkeeper.io/min-member": str(min_member)}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {
            "requests": {"memory": memory}}}]},
    }


def decide_cpu(memory: str, nodes: list[Any], min_member: int = 4) -> Any:
    capacity = Capacity.from_nodes(nodes)
    return decide_pod(cpu_pod(memory, min_member), namespace="team", capacity=capacity,
                      lookup=lambda *_: None, config=capacity.config)


def test_a_cpu_gang_member_bigger_than_every_node_is_refused_at_admission_with_numbers() -> None:
    decision = decide_cpu("400Mi", [plain("a"), plain("b")])
    assert not decision.verdict.allowed and decision.verdict.code == "member-too-big"
    assert "each member needs 400Mi memory on one node" in decision.verdict.reason
    assert "the largest offer 300Mi memory" in decision.verdict.reason
    assert decision.patch == []  # refused, not gated


def test_a_cpu_gang_needing_more_than_all_its_nodes_is_refused_with_numbers() -> None:
    role = Role("worker", 4, {}, requests={"memory": 100 * 2**20})  # 4 x 100Mi
    etl = Gang("team", "etl", 4, (role,), Source("batch/v1", "Job", "team", "etl"))
    verdict = check_gang(etl, Capacity.from_nodes([plain("a")]))  # one node of 300Mi
    assert not verdict.allowed and verdict.code == "total-demand"
    assert "needs 400Mi memory in all" in verdict.reason
    assert "offer at most 300Mi memory" in verdict.reason
    assert check_gang(etl, Capacity.from_nodes([plain("a"), plain("b")])).allowed


def test_a_cpu_gang_that_fits_some_day_is_admitted_and_gated() -> None:
    decision = decide_cpu("100Mi", [plain("a"), plain("b")])
    assert decision.verdict.allowed
    assert {"name": "gangkeeper.io/gang"} in decision.patched["spec"]["schedulingGates"]


def test_gpu_nodes_and_pools_without_gpus_are_room_for_a_cpu_gang() -> None:
    assert decide_cpu("100Mi", [plain("a"), node("g1")]).verdict.allowed  # 512Gi there
    config = load_config({"pools": [{"name": "cpu", "maxCount": 3, "allocatable": {
        "cpu": 8, "memory": "1Gi"}}]})
    capacity = Capacity.from_nodes([plain("a")], config)
    verdict = decide_pod(cpu_pod("400Mi"), namespace="team", capacity=capacity,
                         lookup=lambda *_: None, config=config).verdict
    assert verdict.allowed  # the pool's nodes could hold it


def test_nothing_known_refuses_nothing() -> None:
    assert decide_cpu("400Mi", []).verdict.allowed


def test_nodes_without_gpus_change_nothing_for_gpu_gangs() -> None:
    capacity = Capacity.from_nodes([node("n1"), plain("a"), plain("b")])
    assert capacity.node_count == 1 and capacity.plain_count == 2
    too_many = check_gang(gang(3, 8), capacity)  # 12 GPUs: only the GPU node counts
    assert not too_many.allowed and "(1 node: 8)" in too_many.reason
    cpu = check_gang(gang(2, 100), capacity)  # 200 cpu: the plain nodes' 16 do not count
    assert "the 1 nodes it may use offer at most 128 cpu" in cpu.reason
    capacity.delete_node("a")
    assert capacity.plain_count == 1


def test_a_plain_cpu_job_is_not_refused_its_pods_are_never_gated() -> None:
    # A batch Job asking no GPUs is ordinary work: the pod webhooks never see its pods.
    container = {"name": "t", "image": "x", "resources": {"requests": {"cpu": "4"}}}
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "etl", "namespace": "team"},
        "spec": {"parallelism": 50, "completions": 50,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }
    capacity = Capacity.from_nodes([plain("a")])
    (decision,) = validate_object(
        job, capacity=capacity, lookup=lambda *_: None, config=capacity.config
    )
    assert decision.verdict.allowed
    (pod_decision,) = validate_object(
        cpu_pod("400Mi"), capacity=capacity, lookup=lambda *_: None, config=capacity.config
    )
    assert not pod_decision.verdict.allowed  # a gangkeeper-keyed pod is gated: refused
