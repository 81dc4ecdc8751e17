"""A declared pool's maxCount includes the live nodes it already has.

Before, a pool's live nodes were counted on top of its maxCount, so once an autoscaler
had made some of its nodes, admission let through gangs beyond the pool's real limit
(seen with Karpenter: a gang admitted that no NodePool could ever hold, which then
waited for nodes that never came).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.fit.feasibility import check_gang
from gangkeeper.policies.model import Gang, Placement, Role, Source
from gangkeeper.policies.settings.config import load_config

GPU = "nvidia.com/gpu"
POOL = {"karpenter.sh/nodepool": "h100"}
ON_POOL = Placement(node_selector=tuple(POOL.items()))


def node(name: str, gpus: int = 8, labels: dict[str, str] | None = None,
         cpu: str = "64") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"allocatable": {"cpu": cpu, "memory": "512Gi", GPU: str(gpus)}},
    }


def config(max_count: int, labels: dict[str, str] | None = None, cpu: str = "64") -> Any:
    return load_config({"pools": [{
        "name": "h100", "maxCount": max_count, "labels": POOL if labels is None else labels,
        "allocatable": {GPU: 8, "cpu": cpu, "memory": "512Gi"}}]})


def gang(members: int, *, cpu: int = 1, placement: Placement = ON_POOL) -> Gang:
    role = Role("worker", members, {GPU: 8}, placement, requests={"cpu": cpu * 1000})
    return Gang("team", "llm", members, (role,), Source("batch/v1", "Job", "team", "llm"))


def pool_nodes(capacity: Capacity) -> int:
    return sum(b.count for b in capacity.bins([ON_POOL]) if 0 in b.eligible)


def test_the_pools_own_nodes_count_toward_its_max_count() -> None:
    capacity = Capacity(config(4))
    assert pool_nodes(capacity) == 4  # at zero nodes: the whole pool
    for i in range(3):
        capacity.upsert_node(node(f"n{i}", labels=POOL))
    assert pool_nodes(capacity) == 4  # 3 made + 1 more it may make, not 3 + 4
    for i in range(3, 6):
        capacity.upsert_node(node(f"n{i}", labels=POOL))
    assert pool_nodes(capacity) == 6  # past maxCount: what is there is there
    for i in range(6):
        capacity.delete_node(f"n{i}")
    assert pool_nodes(capacity) == 4


def test_a_gang_beyond_the_pool_is_refused_once_the_pool_has_nodes() -> None:
    capacity = Capacity.from_nodes([node("n0", labels=POOL), node("n1", labels=POOL)], config(4))
    assert check_gang(gang(4), capacity).allowed
    verdict = check_gang(gang(5), capacity)  # 2 live + 4 declared admitted it before
    assert not verdict.allowed
    assert "40" in verdict.reason and "32" in verdict.reason, verdict.reason


def test_the_pools_cpu_follows_its_headroom() -> None:
    # Only the pool's template (256 cpu) holds a 100-cpu member; its live nodes have 64.
    nodes = [node("n0", labels=POOL), node("n1", labels=POOL)]
    capacity = Capacity.from_nodes(nodes, config(3, cpu="256"))
    assert check_gang(gang(1, cpu=100), capacity).allowed  # one more node may come
    capacity.upsert_node(node("n2", labels=POOL))
    verdict = check_gang(gang(1, cpu=100), capacity)
    assert not verdict.allowed and "100 cpu" in verdict.reason, verdict.reason


def test_nodes_the_pool_cannot_recognise_leave_it_at_max_count() -> None:
    unlabelled = Capacity.from_nodes([node("n0"), node("n1")], config(4, labels={}))
    assert sum(b.count for b in unlabelled.bins([Placement()]) if 0 in b.eligible) == 6
    other_gpus = Capacity.from_nodes([node("n0", gpus=4, labels=POOL)], config(4))
    assert pool_nodes(other_gpus) == 5  # a 4-GPU node is not one of the 8-GPU pool's


@settings(max_examples=200, deadline=None)
@given(
    max_count=st.integers(min_value=1, max_value=6),
    ops=st.lists(st.tuples(st.integers(min_value=0, max_value=7), st.booleans(),
                           st.booleans()), max_size=30),
)
def test_pool_nodes_are_always_the_larger_of_live_and_max_count(
    max_count: int, ops: list[tuple[int, bool, bool]]
) -> None:
    """For every sequence of node adds, relabels and deletes."""
    capacity = Capacity(config(max_count))
    live: dict[str, bool] = {}  # node → carries the pool's labels
    for index, present, in_pool in ops:
        name = f"n{index}"
        if present:
            capacity.upsert_node(node(name, labels=POOL if in_pool else {"other": "x"}))
            live[name] = in_pool
        else:
            capacity.delete_node(name)
            live.pop(name, None)
        owned = sum(live.values())
        assert pool_nodes(capacity) == max(owned, max_count)


# --- pools of DRA devices (`devices: {<DeviceClass>: <count per node>}`) ------------------

DEVICES = "dra:gpu.example.com"  # the live path's name for the class's devices


def device_config(max_count: int | None) -> Any:
    """With a pool of `max_count` nodes of 8 devices of DeviceClass gpu.example.com (no
    pool: None), counting `dra:` names as the server and controller do (devices on)."""
    from gangkeeper.webhook.kube.device_view import with_device_names

    pools = [] if max_count is None else [{
        "name": "h100-dra", "maxCount": max_count, "labels": POOL,
        "devices": {"gpu.example.com": 8}, "allocatable": {"cpu": "64"}}]
    return with_device_names(load_config({"pools": pools}))


def dra_gang(members: int) -> Gang:
    role = Role("worker", members, {DEVICES: 8}, ON_POOL, requests={"cpu": 1000})
    return Gang("team", "llm", members, (role,), Source("batch/v1", "Job", "team", "llm"))


def test_a_dra_gang_waiting_for_a_pool_that_declares_its_devices_is_admitted() -> None:
    """A cluster in transition: one device-plugin GPU node, no DRA node yet, and an
    autoscaled pool whose nodes will publish 8 devices each."""
    plugin_node = [node("n0")]
    without = check_gang(dra_gang(4), Capacity.from_nodes(plugin_node, device_config(None)))
    assert not without.allowed  # no node offers the class's devices
    capacity = Capacity.from_nodes(plugin_node, device_config(4))
    assert check_gang(dra_gang(4), capacity).allowed
    beyond = check_gang(dra_gang(5), capacity)
    assert not beyond.allowed
    assert "40" in beyond.reason and "32" in beyond.reason, beyond.reason


def test_a_live_dra_node_of_the_pool_is_one_of_its_nodes() -> None:
    """A node the pool made reaches the capacity with its devices as the live path
    gives them (`dra:<class>`, and the class's extendedResourceName where it serves
    one): it is one of the pool's maxCount, not one more."""
    capacity = Capacity(device_config(4))
    assert pool_nodes(capacity) == 4
    made = node("n0", gpus=8, labels=POOL)  # nvidia.com/gpu served by the class
    made["status"]["allocatable"][DEVICES] = "8"
    made["status"]["allocatable"][DEVICES + "/all"] = "1"  # its whole node (All requests)
    capacity.upsert_node(made)
    assert pool_nodes(capacity) == 4
    verdict = check_gang(dra_gang(5), capacity)
    assert not verdict.allowed and "32" in verdict.reason, verdict.reason


def test_members_asking_every_device_count_one_pool_node_each() -> None:
    """Members of allocationMode All ask 8 devices (the fewest a node offers) and one
    whole node each: with a pool of 2 nodes, 2 are admitted and 3 refused."""
    def all_gang(members: int) -> Gang:
        role = Role("worker", members, {DEVICES: 8, DEVICES + "/all": 1}, ON_POOL,
                    requests={"cpu": 1000})
        return Gang("team", "llm", members, (role,), Source("batch/v1", "Job", "team", "llm"))

    capacity = Capacity.from_nodes([node("n0")], device_config(2))
    assert check_gang(all_gang(2), capacity).allowed
    assert not check_gang(all_gang(3), capacity).allowed
