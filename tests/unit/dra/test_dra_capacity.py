"""DRA capacity: ResourceSlices and DeviceClasses (resource.k8s.io/v1) to device counts.

Objects are plain dicts shaped as `k8s.io/api/resource/v1/types.go` defines them
(ResourceSliceSpec, ResourcePool, Device, DeviceAttribute, DeviceClassSpec,
DeviceSelector/CELDeviceSelector).
"""

from __future__ import annotations

from typing import Any

import pytest

from gangkeeper.policies.dra import (
    UNKNOWN,
    class_capacity,
    node_devices,
    read_device_class,
    read_resource_slice,
)
from gangkeeper.policies.dra.extended import nodes_with_devices
from gangkeeper.policies.errors import InvalidObject

DRIVER = "gpu.example.com"


def device(name: str, model: str = "h100", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {"model": {"string": model}, "index": {"int": int(name.rsplit("-", 1)[-1])}},
        "capacity": {"memory": {"value": "80Gi"}},
        **extra,
    }


def resource_slice(
    node: str | None = "node-0", *, count: int = 8, pool: str | None = None,
    generation: int = 1, slices: int = 1, devices: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {"name": pool or node or "shared", "generation": generation,
                 "resourceSliceCount": slices},
        "devices": devices if devices is not None else [device(f"gpu-{i}") for i in range(count)],
        **spec,
    }
    if node is not None:
        body["nodeName"] = node
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}-{generation}"}, "spec": body}  # fmt: skip


def device_class(*expressions: str, name: str = DRIVER, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions], **spec},
    }


BY_DRIVER = device_class(f"device.driver == '{DRIVER}'")


def count(
    slices: list[dict[str, Any]], cls: dict[str, Any] = BY_DRIVER, node: str = "node-0",
    labels: dict[str, str] | None = None,
) -> int | None:
    read = [read_resource_slice(s) for s in slices]
    return class_capacity(read_device_class(cls), node_devices(read, node, labels or {}))


def test_a_node_with_eight_devices_of_the_driver_offers_eight() -> None:
    assert count([resource_slice(count=8)]) == 8


def test_another_nodes_slice_offers_this_node_nothing() -> None:
    assert count([resource_slice("node-1", count=8)]) == 0


def test_the_classes_cel_selectors_pick_the_devices() -> None:
    devices = [device("gpu-0"), device("gpu-1", model="a100"), device("gpu-2")]
    h100 = device_class(
        f"device.driver == '{DRIVER}'", f"device.attributes['{DRIVER}'].model == 'h100'"
    )
    assert count([resource_slice(devices=devices)], h100) == 2
    other_driver = device_class("device.driver == 'nic.example.com'")
    assert count([resource_slice(devices=devices)], other_driver) == 0


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    old = resource_slice(count=8, generation=1)
    new = resource_slice(count=4, generation=2)
    assert count([old, new]) == 4
    assert count([new, old]) == 4


def test_an_incomplete_pool_is_not_counted_as_the_allocator_skips_it() -> None:
    one_of_two = resource_slice(count=8, slices=2)
    assert count([one_of_two]) == 0
    other_half = resource_slice(count=0, slices=2, devices=[device("gpu-8")])
    assert count([one_of_two, other_half]) == 9


def test_a_pool_with_more_slices_than_its_count_is_incomplete_and_not_counted() -> None:
    """`pools_stable.go` GatherPools: `IsIncomplete = len(Slices) != resourceSliceCount`
    (not `<`): two slices of a pool that says it has one are a pool mid-update."""
    first = resource_slice(count=4, slices=1)
    second = resource_slice(count=0, slices=1, devices=[device("gpu-4"), device("gpu-5")])
    assert count([first]) == 4
    assert count([first, second]) == 0


def test_a_pool_listing_a_device_name_twice_is_invalid_and_offers_nothing() -> None:
    """`pools_stable.go` poolIsInvalid ("duplicate device name"): the allocator skips an
    invalid pool (allocator_stable.go: `pool.IsIncomplete || pool.IsInvalid`)."""
    half = [device(f"gpu-{i}") for i in range(2)]
    twice = [resource_slice(slices=2, devices=half), resource_slice(slices=2, devices=half)]
    assert count(twice) == 0
    within_one = resource_slice(devices=[device("gpu-0"), device("gpu-0"), device("gpu-1")])
    assert count([within_one]) == 0
    # Another pool on the node is not spoiled by it.
    other = resource_slice(pool="other", devices=[device("gpu-0"), device("gpu-1")])
    assert count([*twice, other]) == 2


def test_node_selector_and_all_nodes_slices_reach_the_nodes_they_select() -> None:
    rack = resource_slice(None, count=2, pool="rack-a", nodeSelector={"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]}]}]})
    everywhere = resource_slice(None, count=1, pool="fabric", allNodes=True,
                                devices=[device("gpu-9")])
    assert count([rack, everywhere], labels={"rack": "a"}) == 3
    assert count([rack, everywhere], labels={"rack": "b"}) == 1


@pytest.mark.parametrize(
    "extra",
    [
        {"consumesCounters": [{"counterSet": "gpu-0", "counters": {"mem": {"value": "8Gi"}}}]},
        {"allowMultipleAllocations": True},
        {"taints": [{"key": "example.com/broken", "effect": "NoSchedule"}]},
    ],
    ids=["partitionable", "consumable-capacity", "tainted"],
)  # fmt: skip
def test_a_device_that_can_be_split_shared_or_is_tainted_makes_the_count_unknown(
    extra: dict[str, Any],
) -> None:
    devices = [device("gpu-0"), device("gpu-1", **extra)]
    assert count([resource_slice(devices=devices)]) is UNKNOWN
    # ... unless the class would not take it anyway.
    h100 = device_class(f"device.attributes['{DRIVER}'].index == 0")
    assert count([resource_slice(devices=devices)], h100) == 1


@pytest.mark.parametrize(
    "expression",
    [
        f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0",
        f"device.attributes['{DRIVER}'].driverVersion.isGreaterThan(semver('1.0.0'))",
        f"device.attributes['{DRIVER}'].missing == 'x'",
        "device.driver",
        "device.driver ==",
    ],
    ids=["quantity", "semver", "missing-attribute", "not-a-boolean", "does-not-parse"],
)
def test_a_selector_this_cel_cannot_decide_makes_the_count_unknown_not_zero(
    expression: str,
) -> None:
    assert count([resource_slice(count=8)], device_class(expression)) is UNKNOWN


def test_the_extended_resource_name_of_a_class_is_read() -> None:
    cls = read_device_class(device_class(extendedResourceName="nvidia.com/gpu"))
    assert cls.extended_resource_name == "nvidia.com/gpu"
    assert read_device_class(device_class()).extended_resource_name == ""


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda s: s["spec"]["pool"].pop("resourceSliceCount"), "spec.pool.resourceSliceCount"),
        (lambda s: s["spec"]["pool"].update(generation="1"), "spec.pool.generation"),
        (lambda s: s["spec"].pop("driver"), "spec.driver"),
        (lambda s: s["spec"]["devices"][0]["attributes"].update(model={}),
         'spec.devices[0].attributes.model'),
        (lambda s: s["spec"]["devices"][1]["capacity"]["memory"].pop("value"),
         "spec.devices[1].capacity.memory.value"),
    ],
    ids=["no-slice-count", "string-generation", "no-driver", "empty-attribute", "no-value"],
)
def test_a_malformed_slice_is_an_error_naming_the_slice_and_field(edit: Any, field: str) -> None:
    body = resource_slice(count=2)
    edit(body)
    with pytest.raises(InvalidObject) as caught:
        read_resource_slice(body)
    assert field in str(caught.value) and "ResourceSlice node-0-" in str(caught.value)


def test_a_class_selector_without_an_expression_is_an_error_naming_the_field() -> None:
    body = device_class()
    body["spec"]["selectors"] = [{"cel": {}}]
    where = r"DeviceClass gpu.example.com: spec.selectors\[0\].cel.expression"
    with pytest.raises(InvalidObject, match=where):
        read_device_class(body)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # kubernetes-sigs/dra-example-driver,
        # deployments/helm/dra-example-driver/templates/deviceclass.yaml (class gpu.example.com)
        ("device.driver == 'gpu.example.com'", 8),
        # The same class, as a driver of another name sees it: no device of it.
        ("device.driver == 'nic.example.com'", 0),
        # kubernetes.io, Dynamic Resource Allocation, "extended resource" DeviceClass
        # (extendedResourceName: example.com/gpu)
        ("device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].type == 'gpu'",
         8),
        # The Kubernetes API reference's CELDeviceSelector example attributes, with the
        # driver's domain: ours have model "h100".
        ('device.attributes["gpu.example.com"].model == "h100"', 8),
        # kubernetes.io DRA examples: a capacity compared through quantity(), a
        # Kubernetes CEL library this package does not have: undecided, count unknown.
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("10Gi")) >= 0', UNKNOWN),
    ],
    ids=["example-driver-class", "other-driver", "docs-extended-resource-class",
         "api-reference-attribute", "docs-quantity"],
)  # fmt: skip
def test_upstream_selector_examples_get_the_verdict_this_cel_can_give(
    expression: str, expected: int | object,
) -> None:
    devices = [device(f"gpu-{i}") for i in range(8)]
    for d in devices:
        d["attributes"]["type"] = {"string": "gpu"}  # as the docs' class expects
    assert count([resource_slice(devices=devices)], device_class(expression)) == expected


def test_a_pool_whose_slices_target_different_nodes_is_complete_on_each() -> None:
    """One pool, `resourceSliceCount: 2`, a slice per node: since Kubernetes 1.35
    (kubernetes#134466) the allocator judges the pool over every node's slices, so each
    node gets its own slice's devices (counted per node, it looked incomplete: 0)."""
    on_0 = resource_slice("node-0", count=2, pool="shared", slices=2)
    on_1 = resource_slice("node-1", count=0, pool="shared", slices=2,
                          devices=[device("gpu-2"), device("gpu-3")])
    assert count([on_0, on_1], node="node-0") == 2
    assert count([on_0, on_1], node="node-1") == 2
    nodes = [{"metadata": {"name": n}, "status": {"allocatable": {}}}
             for n in ("node-0", "node-1")]  # fmt: skip
    read = [read_resource_slice(s) for s in (on_0, on_1)]
    out, _ = nodes_with_devices(nodes, read, [read_device_class(BY_DRIVER)])
    assert [n["status"]["allocatable"][f"dra:{DRIVER}"] for n in out] == ["2", "2"]


def test_a_newer_generation_on_another_node_makes_this_nodes_slices_out_dated() -> None:
    old = resource_slice("node-0", count=2, pool="shared", generation=1, slices=2)
    new = resource_slice("node-1", count=2, pool="shared", generation=2, slices=1)
    assert count([old, new], node="node-0") == 0
    assert count([old, new], node="node-1") == 2
