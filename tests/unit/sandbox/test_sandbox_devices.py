"""What the sandbox publishes for a fleet's DRA devices (webhook/sandbox/devices.py):
the objects a driver's kubelet plugin and the cluster admin would create, as
`k8s.io/api/resource/v1` shapes them, and read back by gangkeeper's own readers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangkeeper.policies.dra import (
    class_capacity,
    node_devices,
    read_device_class,
    read_resource_slice,
)
from gangkeeper.webhook.sandbox.devices import device_class, split_fleet
from gangkeeper.webhook.sandbox.errors import SandboxError


def entry(name: str, **devices: Any) -> dict[str, Any]:
    node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    if devices:
        node["devices"] = devices
    return node


def test_a_node_entry_with_devices_gets_one_complete_pool_of_its_own_and_its_driver_a_class(
) -> None:
    nodes, objects = split_fleet([
        entry("dra-0", driver="gpu.example.com", count=8, attributes={"productName": "H100"}),
        entry("plain"),
    ])
    assert [n["metadata"]["name"] for n in nodes] == ["dra-0", "plain"]
    assert all("devices" not in n for n in nodes)  # not a Node field: never sent
    assert [o["kind"] for o in objects] == ["DeviceClass", "ResourceSlice"]
    spec = objects[1]["spec"]
    assert spec["nodeName"] == "dra-0" and "allNodes" not in spec
    assert spec["pool"] == {"name": "dra-0", "generation": 1, "resourceSliceCount": 1}
    assert spec["devices"][0]["attributes"] == {"productName": {"string": "H100"}}
    # gangkeeper's readers count what the sandbox publishes: 8 devices of the class.
    devices = node_devices([read_resource_slice(objects[1])], "dra-0", {})
    assert class_capacity(read_device_class(objects[0]), devices) == 8


def test_a_device_class_in_the_fleet_file_is_kept_and_not_made_twice() -> None:
    own = device_class("gpu.example.com", expression='device.attributes["gpu.example.com"]'
                       '.productName == "H100"')
    _, objects = split_fleet([own, entry("dra-0", count=2)])
    classes = [o for o in objects if o["kind"] == "DeviceClass"]
    assert classes == [own]


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        ({"count": 0}, r"fleet item 0\.devices\.count: must be a positive integer"),
        ({"count": 8, "colour": "red"}, r"fleet item 0\.devices: unknown field 'colour'"),
        ({"count": 8, "attributes": {"mem": 1.5}},
         r"fleet item 0\.devices\.attributes\.mem: must be a string"),
    ],
)
def test_bad_devices_are_refused_naming_the_entry_and_field(
    devices: dict[str, Any], message: str
) -> None:
    with pytest.raises(SandboxError, match=message):
        split_fleet([entry("dra-0", **devices)])


def test_another_kind_in_the_fleet_is_refused_naming_it() -> None:
    with pytest.raises(SandboxError, match="fleet item 1: expected kind Node, ResourceSlice, "
                       "DeviceClass, got Job"):
        split_fleet([entry("a"), {"kind": "Job"}])


def test_the_fleet_entry_docs_sandbox_md_shows_publishes_eight_h100_devices() -> None:
    text = (Path(__file__).parents[3] / "docs" / "sandbox.md").read_text()
    section = text.split("### GPUs as DRA devices", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block, "docs/sandbox.md's DRA section shows no fleet entry"
    nodes, objects = split_fleet(yaml.safe_load(block.group(1)))
    assert [n["metadata"]["name"] for n in nodes] == ["dra-node-0"]
    [klass] = [o for o in objects if o["kind"] == "DeviceClass"]
    [piece] = [o for o in objects if o["kind"] == "ResourceSlice"]
    assert klass["metadata"]["name"] == piece["spec"]["driver"] == "gpu.example.com"
    assert len(piece["spec"]["devices"]) == 8
    assert {d["attributes"]["productName"]["string"] for d in piece["spec"]["devices"]} == {"H100"}
    with pytest.raises(SandboxError, match=r"fleet item 3\.devices\.count: must be a positive"):
        split_fleet([entry(f"n{i}") for i in range(3)] + [entry("bad", count=0)])
