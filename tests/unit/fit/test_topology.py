"""Topology domains: a topology-required gang is placed inside one domain of the key,
and refused at admission when no domain could ever hold it."""

from __future__ import annotations

from typing import Any

from builders.gangs import members, node

from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.fit.feasibility import check_gang
from gangkeeper.policies.model import Gang, Role, Source
from gangkeeper.policies.names import TOPOLOGY_PREFERRED_ANNOTATION, TOPOLOGY_REQUIRED_ANNOTATION
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import Plan
from gangkeeper.policies.settings.config import load_config

ZONE = "topology.kubernetes.io/zone"
CFG = load_config({"topology": [ZONE]})


def zoned(name: str, zone: str, gpus: int = 8) -> dict[str, Any]:
    return node(name, gpus, labels={ZONE: zone})


def gang(count: int, gpus: int, mode: str = "required") -> Gang:
    return Gang("team", "llm", count, (Role("w", count, {"nvidia.com/gpu": gpus}),),
                Source("batch/v1", "Job", "team", "llm"), topology=(mode, ZONE))


def test_a_gang_no_domain_could_hold_is_refused_with_numbers() -> None:
    capacity = Capacity.from_nodes(
        [zoned("a1", "a"), zoned("a2", "a"), zoned("a3", "a"), zoned("b1", "b")], CFG
    )
    verdict = check_gang(gang(4, 8), capacity)
    assert not verdict.allowed and verdict.code == "topology"
    assert (
        "must run inside one topology.kubernetes.io/zone domain; the largest "
        "topology.kubernetes.io/zone domain holds 24 nvidia.com/gpu; the gang needs 32"
    ) in verdict.reason
    assert check_gang(gang(3, 8), capacity).allowed
    assert check_gang(gang(4, 8, mode="preferred"), capacity).allowed


def test_a_pool_without_the_key_or_an_unlisted_key_admits_with_a_warning() -> None:
    config = load_config({"topology": [ZONE], "pools": [
        {"name": "p", "maxCount": 4, "allocatable": {"nvidia.com/gpu": 8}}]})
    capacity = Capacity.from_nodes([zoned("a1", "a")], config)
    verdict = check_gang(gang(4, 8), capacity)
    assert verdict.allowed and "does not set" in verdict.warnings[0]
    unlisted = Capacity.from_nodes([zoned(f"n{i}", "a") for i in range(4)], load_config({}))
    verdict = check_gang(gang(4, 8), unlisted)
    assert verdict.allowed and "not in the config's topology" in verdict.warnings[0]


def decide(pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> Plan:
    return plan([pod_info(p, CFG) for p in pods], nodes, CFG, 0.0)


def annotated(mode_annotation: str, count: int, gpus: int) -> list[dict[str, Any]]:
    pods = members("g", count, gpus=gpus)
    for raw in pods:
        raw["metadata"]["annotations"][mode_annotation] = ZONE
    return pods


def test_a_required_gang_is_pinned_inside_one_domain() -> None:
    # Zone a: 8 + 8 free; zone b: 8 free on one node and 4 on another (busy). 2 x 8 fits a only.
    nodes = [zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b"), zoned("b2", "b", gpus=4)]
    result = decide(annotated(TOPOLOGY_REQUIRED_ANNOTATION, 2, 8), nodes)
    (release,) = result.releases
    assert sorted(release.pins.values()) == ["a1", "a2"]
    # 3 x 4: zone b (12 GPUs) holds it and is the fuller domain: it goes there.
    result = decide(annotated(TOPOLOGY_REQUIRED_ANNOTATION, 3, 4), nodes)
    (release,) = result.releases
    assert set(release.pins.values()) <= {"b1", "b2"}


def test_required_waits_when_no_domain_has_room_preferred_spreads() -> None:
    nodes = [zoned("a1", "a"), zoned("b1", "b")]
    result = decide(annotated(TOPOLOGY_REQUIRED_ANNOTATION, 2, 8), nodes)
    assert result.releases == ()
    assert "no single topology.kubernetes.io/zone domain" in result.reports[0].reason
    result = decide(annotated(TOPOLOGY_PREFERRED_ANNOTATION, 2, 8), nodes)
    (release,) = result.releases
    assert sorted(release.pins.values()) == ["a1", "b1"]


def test_preferred_packs_the_gang_into_as_few_domains_as_possible() -> None:
    # Three 4-GPU members: zone a has one node with 8 GPUs, zones b and c one with 4.
    # No zone holds the gang; a + b does. Best fit over every node (the behaviour
    # before) took the tightest nodes first, b1 and c1, and used all three zones.
    nodes = [zoned("a1", "a"), zoned("b1", "b", 4), zoned("c1", "c", 4)]
    (release,) = decide(annotated(TOPOLOGY_PREFERRED_ANNOTATION, 3, 4), nodes).releases
    assert sorted(release.pins.values()) == ["a1", "a1", "b1"]


def test_domains_count_dra_devices_like_gpus() -> None:
    # Nodes offering a DeviceClass's devices (as `check` and the webhooks see them:
    # policies/dra/extended.py), two per zone: 3 x 8 packs on the nodes, in no zone.
    from gangkeeper.policies.dra import read_device_class, read_resource_slice
    from gangkeeper.policies.dra.extended import nodes_with_devices, with_device_resources

    def devices(name: str, count: int) -> Any:
        return read_resource_slice({"metadata": {"name": name}, "spec": {
            "driver": "gpu.example.com", "nodeName": name,
            "pool": {"name": name, "generation": 0, "resourceSliceCount": 1},
            "devices": [{"name": f"d{i}"} for i in range(count)]}})  # fmt: skip

    gpus = read_device_class({"metadata": {"name": "gpus"}, "spec": {
        "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}})
    plain = [{"metadata": {"name": n, "labels": {ZONE: z, "kubernetes.io/hostname": n}},
              "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}}}
             for n, z in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b"))]  # fmt: skip
    counts = {"a1": 8, "a2": 8, "b1": 8, "b2": 4}
    nodes, _ = nodes_with_devices(plain, [devices(n, c) for n, c in counts.items()], [gpus])
    config = with_device_resources(CFG, [gpus])
    capacity = Capacity.from_nodes(nodes, config)
    need = {"dra:gpus": 8}

    def dra_gang(count: int) -> Gang:
        return Gang("team", "llm", count, (Role("w", count, need),),
                    Source("batch/v1", "Job", "team", "llm"), topology=("required", ZONE))

    verdict = check_gang(dra_gang(3), capacity)
    assert not verdict.allowed and verdict.code == "topology"
    assert "holds 16" in verdict.reason and "needs 24" in verdict.reason, verdict.reason
    assert check_gang(dra_gang(2), capacity).allowed
