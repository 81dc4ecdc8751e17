"""`allocationMode: All` takes a whole node's devices of its class (policies/dra/extended.py).

`ExactDeviceRequest.allocationMode: All` (k8s.io/api/resource/v1/types.go) asks every
device of the class in the pools the node sees; the allocator fails when any of them is
taken. So N members asking All need N distinct nodes offering the class, and a node
where some device of the class is used takes no All member now.

Plain dicts shaped as the v1 API: ResourceSlices (`spec.nodeName`, `spec.pool`,
`spec.devices[]`), a DeviceClass with a CEL selector, ResourceClaimTemplates, and core/v1
Nodes and a PodSpec's `resourceClaims`. Fleet: node `small` with 4 devices, `big` with 8.
"""

from __future__ import annotations

from typing import Any

from builders.devices import DRIVER, GPUS, GPUS_CONFIG, node

from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.cluster.fleet import Fleet
from gangkeeper.policies.cluster.node_facts import node_fields
from gangkeeper.policies.dra import (
    DeviceDemand,
    read_claim_template,
    read_resource_slice,
)
from gangkeeper.policies.dra.extended import (
    fewest_with_pools,
    nodes_with_devices,
    with_claim_limits,
    with_device_resources,
)
from gangkeeper.policies.dra.resource_names import resource_text
from gangkeeper.policies.fit.feasibility import check_gang, fits_now
from gangkeeper.policies.model import Gang, Role, Source
from gangkeeper.policies.settings.config import load_config

TIMES = "\u00d7"
CONFIG = GPUS_CONFIG


def slice_of(name: str, devices: int, **device: Any) -> Any:
    return read_resource_slice({"metadata": {"name": name}, "spec": {
        "driver": DRIVER, "nodeName": name,
        "pool": {"name": name, "generation": 0, "resourceSliceCount": 1},
        "devices": [{"name": f"d{i}", **device} for i in range(devices)]}})  # fmt: skip


def template(**exactly: Any) -> DeviceDemand:
    return read_claim_template({"metadata": {"name": "t"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpus", **exactly}}]}}}})[1]


ALL = template(allocationMode="All")
FOUR = template(count=4)


def fleet(held: frozenset[tuple[str, str, str]] = frozenset(), **device: Any
          ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    return nodes_with_devices([node("small"), node("big")],
                              [slice_of("small", 4, **device), slice_of("big", 8, **device)],
                              [GPUS], held)  # fmt: skip


def member_limits(demand: DeviceDemand, fewest: dict[str, int]) -> dict[str, int]:
    """What one member's pod asks, as `with_claim_limits` writes its claims."""
    pod = {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}],
           "containers": [{"name": "main"}]}  # fmt: skip
    limits = with_claim_limits(pod, {"t": demand}, fewest)["containers"][0]["resources"]["limits"]
    return {k: int(v) for k, v in limits.items()}


def gang(members: int, demand: DeviceDemand, fewest: dict[str, int]) -> Gang:
    return Gang("team", "g", members, (Role("worker", members, member_limits(demand, fewest)),),
                Source("batch/v1", "Job", "team", "g"))


def test_two_all_members_on_nodes_of_four_and_eight_fit_one_on_each() -> None:
    nodes, fewest = fleet()
    assert check_gang(gang(2, ALL, fewest), Capacity.from_nodes(nodes, CONFIG)).allowed


def test_three_all_members_on_two_nodes_are_refused_in_words_naming_three_and_two() -> None:
    # Before: counted as 3 x 4 (the fewest a node offers) = 12 on 4 + 8, admitted.
    nodes, fewest = fleet()
    verdict = check_gang(gang(3, ALL, fewest), Capacity.from_nodes(nodes, CONFIG))
    assert not verdict.allowed
    assert (f"3 {TIMES} 1 nodes giving every device of DeviceClass gpus (allocationMode All) = 3"
            in verdict.reason), verdict.reason
    assert "at most 2" in verdict.reason, verdict.reason
    assert "dra:" not in verdict.reason


def test_exact_count_members_ask_no_whole_node_and_are_counted_as_before() -> None:
    nodes, fewest = fleet()
    assert member_limits(FOUR, fewest) == {"dra:gpus": 4}
    capacity = Capacity.from_nodes(nodes, CONFIG)
    assert check_gang(gang(3, FOUR, fewest), capacity).allowed  # 1 on small, 2 on big
    assert not check_gang(gang(4, FOUR, fewest), capacity).allowed


def test_an_all_member_beside_exact_count_members_takes_a_node_of_its_own() -> None:
    nodes, fewest = fleet()
    mixed = Gang("team", "g", 3, (Role("all", 1, member_limits(ALL, fewest)),
                                  Role("four", 2, member_limits(FOUR, fewest))),
                 Source("batch/v1", "Job", "team", "g"))  # fmt: skip
    assert check_gang(mixed, Capacity.from_nodes(nodes, CONFIG)).allowed


def test_a_node_whose_devices_a_claim_holds_takes_no_all_member_now() -> None:
    # One device of `small` held by an allocated claim: the All member cannot take the
    # node now (allocation fails if any device is taken); 2 All members wait.
    nodes, fewest = fleet(held=frozenset({(DRIVER, "small", "d0")}))
    slim = [n for n in map(node_fields, nodes) if n is not None]
    now = Fleet(slim, [], CONFIG)
    assert fits_now(gang(2, ALL, fewest), now.capacity) is False
    assert check_gang(gang(2, ALL, fewest), now.capacity).allowed  # could ever run


def test_a_bound_pod_using_one_device_of_a_node_leaves_it_no_all_slot_now() -> None:
    nodes, fewest = fleet()
    capacity = Capacity.from_nodes(nodes, CONFIG)
    capacity.add_pod("other", "big", {"dra:gpus": 1})
    assert fits_now(gang(2, ALL, fewest), capacity) is False
    assert fits_now(gang(1, ALL, fewest), capacity) is True  # `small` is whole


def test_a_bound_all_pod_takes_every_device_of_its_node() -> None:
    # The All pod on `big` asks 4 (the fewest) but the allocator gave it all 8.
    nodes, fewest = fleet()
    capacity = Capacity.from_nodes(nodes, CONFIG)
    capacity.add_pod("whole", "big", member_limits(ALL, fewest))
    assert fits_now(gang(2, FOUR, fewest), capacity) is False
    assert fits_now(gang(1, FOUR, fewest), capacity) is True


def test_an_unknown_count_refuses_no_all_member() -> None:
    # Tainted devices: the count of the class is unknown on both nodes.
    nodes, fewest = fleet(taints=[{"key": "k", "effect": "NoSchedule"}])
    assert check_gang(gang(3, ALL, fewest), Capacity.from_nodes(nodes, CONFIG)).allowed


def test_the_whole_node_resource_is_named_in_words() -> None:
    nodes, _ = fleet()
    allocatable = nodes[0]["status"]["allocatable"]
    (slot,) = [r for r in allocatable if r.startswith("dra:") and r != "dra:gpus"]
    assert allocatable[slot] == "1"
    assert resource_text(slot) == (
        "nodes giving every device of DeviceClass gpus (allocationMode All)")


def test_one_held_device_leaves_the_other_devices_of_its_node_free_now() -> None:
    # A claim no pod owns holds one device of `big`: the node takes no All member now,
    # but its 7 other devices are free (a held whole node made all 8 look taken, and
    # a 2 x 4 gang that fits waited for ever).
    nodes, fewest = fleet(held=frozenset({(DRIVER, "big", "d0")}))
    now = Fleet([n for n in map(node_fields, nodes) if n is not None], [], CONFIG)
    assert now.free("big")["dra:gpus"] == 7
    assert fits_now(gang(2, FOUR, fewest), now.capacity) is True  # 4 on small, 4 on big
    assert fits_now(gang(2, ALL, fewest), now.capacity) is False  # big is not whole


def test_all_members_waiting_for_a_pool_of_smaller_nodes_ask_what_a_pool_node_offers() -> None:
    # Live nodes of 4 and 8 and a pool of four nodes of 2 devices: an All member asks
    # the fewest of all of them (2), so 4 members fit (2 live + pool nodes), where asking
    # the fewest live count (4) fitted no pool node and refused 3.
    pool = {"name": "small", "maxCount": 4, "labels": {"pool": "small"},
            "devices": {"gpus": 2}, "allocatable": {"cpu": "64"}}
    config = with_device_resources(load_config({"pools": [pool]}), [GPUS])
    nodes, fewest = fleet()
    asked = fewest_with_pools(fewest, config.pools)
    assert asked == {"gpus": 2}
    capacity = Capacity.from_nodes(nodes, config)
    assert check_gang(gang(4, ALL, asked), capacity).allowed
    assert not check_gang(gang(4, ALL, fewest), capacity).allowed  # the old charge
    assert not check_gang(gang(7, ALL, asked), capacity).allowed  # 6 nodes in all
