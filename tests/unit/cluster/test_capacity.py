"""Capacity: GPU nodes as shapes, pools, bound-pod usage, and readable node errors."""

from __future__ import annotations

from typing import Any

import pytest

from gangkeeper.policies.cluster.capacity import Bin, Capacity
from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.model import NodeSelectorTerm, Placement, Requirement, Taint, Toleration
from gangkeeper.policies.settings.config import Config, NodePool

GPU = "nvidia.com/gpu"


def node(
    name: str,
    gpus: int | str = 8,
    *,
    resource: str = GPU,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", resource: str(gpus)}},
    }


def totals(bins: list[Bin], index: int = 0) -> dict[int, int]:
    """GPUs per node → number of nodes, over the bins placement `index` may use."""
    out: dict[int, int] = {}
    for b in bins:
        if index in b.eligible:
            out[b.amount(GPU)] = out.get(b.amount(GPU), 0) + b.count
    return out


def test_identical_nodes_compress_to_one_shape_despite_hostnames() -> None:
    capacity = Capacity.from_nodes([node(f"n{i}") for i in range(100)])
    assert capacity.node_count == 100
    assert capacity.shape_count == 1
    assert capacity.bins([Placement()]) == [Bin(((GPU, 8),), 100, frozenset({0}))]


def test_nodes_without_gpus_are_left_out() -> None:
    capacity = Capacity.from_nodes([node("cpu-only", 0), node("g", 4)])
    assert capacity.node_count == 1
    assert totals(capacity.bins([Placement()])) == {4: 1}


def test_shapes_split_by_labels_taints_and_gpu_amount() -> None:
    capacity = Capacity.from_nodes(
        [
            node("a", 8, labels={"pool": "a"}),
            node("b", 8, labels={"pool": "b"}),
            node("c", 4, labels={"pool": "a"}),
            node("d", 8, labels={"pool": "a"}, taints=[{"key": "x", "effect": "NoSchedule"}]),
        ]
    )
    assert capacity.shape_count == 4
    pool_a = Placement(node_selector=(("pool", "a"),))
    assert totals(capacity.bins([pool_a])) == {8: 1, 4: 1}


def test_update_moves_a_node_between_shapes_and_delete_forgets_it() -> None:
    capacity = Capacity.from_nodes([node("a", 8), node("b", 8)])
    capacity.upsert_node(node("a", 4))
    assert totals(capacity.bins([Placement()])) == {8: 1, 4: 1}
    capacity.delete_node("a")
    capacity.delete_node("a")  # deletes can repeat
    assert totals(capacity.bins([Placement()])) == {8: 1}
    capacity.upsert_node(node("b", 0))
    assert capacity.unknown


def test_bound_pods_reduce_free_capacity_only() -> None:
    capacity = Capacity.from_nodes([node("a", 8), node("b", 8)])
    capacity.add_pod("p1", "a", {GPU: 3, "cpu": 4})
    capacity.add_pod("p2", "a", {GPU: 5})
    assert totals(capacity.bins([Placement()], view="free")) == {8: 1}
    assert totals(capacity.bins([Placement()], view="ever")) == {8: 2}
    capacity.remove_pod("p2")
    capacity.remove_pod("p2")
    assert totals(capacity.bins([Placement()], view="free")) == {8: 1, 5: 1}


def test_re_adding_a_pod_by_uid_replaces_its_usage() -> None:
    capacity = Capacity.from_nodes([node("a", 8), node("b", 8)])
    capacity.add_pod("p1", "a", {GPU: 3})
    capacity.add_pod("p1", "b", {GPU: 1})
    assert totals(capacity.bins([Placement()], view="free")) == {8: 1, 7: 1}


def test_a_pod_bound_before_its_node_is_known_counts_when_the_node_arrives() -> None:
    capacity = Capacity()
    capacity.add_pod("p1", "late", {GPU: 6})
    capacity.upsert_node(node("late", 8))
    assert totals(capacity.bins([Placement()], view="free")) == {2: 1}
    capacity.remove_pod("p1")
    assert totals(capacity.bins([Placement()], view="free")) == {8: 1}


def test_cordoned_and_not_ready_nodes_count_ever_but_not_now() -> None:
    capacity = Capacity.from_nodes(
        [
            node("cordoned", 8, unschedulable=True),
            node(
                "down", 8, taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]
            ),
        ]
    )
    assert totals(capacity.bins([Placement()], view="ever")) == {8: 2}
    assert totals(capacity.bins([Placement()], view="free")) == {}
    tolerant = Placement(tolerations=(Toleration(operator="Exists"),))
    assert totals(capacity.bins([tolerant], view="free")) == {8: 2}


def test_declared_pools_count_at_max_count_even_with_no_nodes() -> None:
    pool = NodePool(
        name="h100", max_count=4, labels={"pool": "h100"}, allocatable={GPU: 8, "cpu": 96}
    )
    capacity = Capacity(Config(pools=(pool,)))
    assert not capacity.unknown
    assert capacity.node_count == 0
    assert totals(capacity.bins([Placement(node_selector=(("pool", "h100"),))])) == {8: 4}
    # A pool has no nodes now, so nothing is free.
    assert totals(capacity.bins([Placement()], view="free")) == {}


def test_pool_taints_apply_to_its_future_nodes() -> None:
    pool = NodePool(
        name="p", max_count=2, taints=(Taint("gpu", "", "NoSchedule"),), allocatable={GPU: 8}
    )
    capacity = Capacity(Config(pools=(pool,)))
    assert totals(capacity.bins([Placement()])) == {}
    tolerant = Placement(tolerations=(Toleration(key="gpu", operator="Exists"),))
    assert totals(capacity.bins([tolerant])) == {8: 2}


def test_no_gpu_nodes_and_no_pools_is_reported_as_unknown() -> None:
    assert Capacity().unknown
    assert Capacity.from_nodes([node("cpu", 0)]).unknown
    assert not Capacity.from_nodes([node("g", 1)]).unknown


def test_pinning_by_node_name_or_hostname_is_answered_per_node() -> None:
    capacity = Capacity.from_nodes([node(f"n{i}") for i in range(5)])
    pin = Requirement("metadata.name", "In", ("n3",))
    by_name = Placement(required_terms=(NodeSelectorTerm(match_fields=(pin,)),))
    by_host = Placement(node_selector=(("kubernetes.io/hostname", "n1"),))
    bins = capacity.bins([by_name, by_host, Placement()])
    assert totals(bins, 0) == {8: 1}
    assert totals(bins, 1) == {8: 1}
    assert totals(bins, 2) == {8: 5}


def test_each_gpu_resource_is_kept_apart() -> None:
    capacity = Capacity.from_nodes([node("n", 8), node("m", 2, resource="amd.com/gpu")])
    assert sorted(capacity.gpu_resources()) == ["amd.com/gpu", GPU]
    amounts = sorted((b.amount(GPU), b.amount("amd.com/gpu")) for b in capacity.bins([Placement()]))
    assert amounts == [(0, 2), (8, 0)]


def test_configured_gpu_names_decide_what_counts() -> None:
    capacity = Capacity.from_nodes(
        [node("n", 8, resource="example.com/tpu")], Config(gpu_resources=("example.com/*",))
    )
    assert capacity.node_count == 1


@pytest.mark.parametrize(
    ("broken", "field"),
    [
        ({"status": {"allocatable": {GPU: "1.5x"}}}, 'status.allocatable["nvidia.com/gpu"]'),
        ({"status": {"allocatable": {GPU: "-2"}}}, 'status.allocatable["nvidia.com/gpu"]'),
        ({"status": {"allocatable": [1]}}, "status.allocatable"),
        ({"spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}}, "spec.taints[0].effect"),
        ({"spec": {"taints": [{"effect": "NoSchedule"}]}}, "spec.taints[0].key"),
        ({"spec": {"unschedulable": "yes"}}, "spec.unschedulable"),
        ({"metadata": {"name": "bad", "labels": {"a": 1}}}, "metadata.labels.a"),
    ],
)
def test_malformed_nodes_raise_invalid_object_naming_node_and_field(
    broken: dict[str, Any], field: str
) -> None:
    raw = node("bad")
    for part, body in broken.items():
        raw[part] = {**raw[part], **body}
    capacity = Capacity()
    with pytest.raises(InvalidObject) as caught:
        capacity.upsert_node(raw)
    assert "Node bad" in str(caught.value)
    assert field in str(caught.value)
    assert capacity.node_count == 0


def test_a_node_without_a_name_is_an_error() -> None:
    with pytest.raises(InvalidObject, match=r"metadata\.name"):
        Capacity().upsert_node({"kind": "Node", "metadata": {}})


def test_fractional_allocatable_offers_its_floor() -> None:
    capacity = Capacity.from_nodes([node("n", "2500m")])
    assert totals(capacity.bins([Placement()])) == {2: 1}


def bound_pod(uid: str, node_name: str, gpus: int | str, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": uid, "uid": uid},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"limits": {GPU: str(gpus)}}}],
        },
        "status": {"phase": phase},
    }


def test_pod_objects_count_their_effective_demand_until_they_finish() -> None:
    capacity = Capacity.from_nodes([node("a", 8)])
    capacity.add_pod_object(bound_pod("p1", "a", 3))
    assert totals(capacity.bins([Placement()], view="free")) == {5: 1}
    capacity.add_pod_object(bound_pod("p1", "a", 3, phase="Succeeded"))
    assert totals(capacity.bins([Placement()], view="free")) == {8: 1}


def test_a_pod_object_with_a_fractional_gpu_is_an_error_naming_the_field() -> None:
    with pytest.raises(InvalidObject, match=r"Pod\.spec\.containers\[0\]"):
        Capacity.from_nodes([node("a", 8)]).add_pod_object(bound_pod("p", "a", "1.5"))


def test_configured_identity_labels_keep_unique_labels_out_of_shapes() -> None:
    nodes = [node(f"n{i}", labels={"example.com/instance-id": f"i-{i}"}) for i in range(50)]
    assert Capacity.from_nodes(nodes).shape_count == 50
    config = Config(node_identity_labels=("kubernetes.io/hostname", "example.com/instance-id"))
    capacity = Capacity.from_nodes(nodes, config)
    assert capacity.shape_count == 1
    pinned = Placement(node_selector=(("example.com/instance-id", "i-7"),))
    assert totals(capacity.bins([pinned, Placement()])) == {8: 1}
    assert totals(capacity.bins([pinned, Placement()]), 1) == {8: 50}
