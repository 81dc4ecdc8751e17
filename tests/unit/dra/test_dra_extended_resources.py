"""DRA classes as extended resources for the packing (policies/dra/extended.py).

Plain dicts shaped as `k8s.io/api/resource/v1/types.go` (ResourceSlice, DeviceClass
with `extendedResourceName`) and core/v1 Node and PodSpec `resourceClaims`.
"""

from __future__ import annotations

from typing import Any

from gangkeeper.policies.dra import DeviceDemand, read_device_class, read_resource_slice
from gangkeeper.policies.dra.extended import (
    nodes_with_devices,
    with_claim_limits,
    with_device_resources,
)
from gangkeeper.policies.settings.config import load_config

DRIVER = "gpu.example.com"


def node(name: str, **allocatable: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": allocatable}}


def slice_of(name: str, devices: int) -> Any:
    return read_resource_slice({"metadata": {"name": name}, "spec": {
        "driver": DRIVER, "nodeName": name,
        "pool": {"name": name, "generation": 0, "resourceSliceCount": 1},
        "devices": [{"name": f"d{i}"} for i in range(devices)]}})  # fmt: skip


GPUS = read_device_class({"metadata": {"name": "gpus"}, "spec": {
    "selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}],
    "extendedResourceName": "nvidia.com/gpu"}})  # fmt: skip


def test_nodes_get_the_classes_devices_and_the_extended_name_only_where_they_lack_it() -> None:
    given = [node("a", cpu="8"), node("b", **{"nvidia.com/gpu": "2"})]
    nodes, fewest = nodes_with_devices(given, [slice_of("a", 8), slice_of("b", 4)], [GPUS])
    assert nodes[0]["status"]["allocatable"] == {
        "cpu": "8", "dra:gpus": "8", "dra:gpus/all": "1", "nvidia.com/gpu": "8"
    }
    assert nodes[1]["status"]["allocatable"] == {"nvidia.com/gpu": "2", "dra:gpus": "4",
                                                 "dra:gpus/all": "1"}
    assert fewest == {"gpus": 4}
    assert given[0]["status"]["allocatable"] == {"cpu": "8"}  # not changed in place


def test_the_config_counts_the_class_resources_as_gpus() -> None:
    config = with_device_resources(load_config(None), [GPUS])
    assert config.is_gpu_resource("dra:gpus") and config.is_gpu_resource("nvidia.com/gpu")


def test_a_pods_claims_become_limits_and_all_asks_the_fewest_a_node_offers() -> None:
    job = {"kind": "Job", "spec": {"template": {"spec": {
        "resourceClaims": [{"name": "a", "resourceClaimTemplateName": "eight"},
                           {"name": "b", "resourceClaimTemplateName": "every"}],
        "containers": [{"name": "main"}, {"name": "side"}]}}}}  # fmt: skip
    templates = {"eight": DeviceDemand({"gpus": 8}), "every": DeviceDemand({}, frozenset({"nic"}))}
    out = with_claim_limits(job, templates, {"nic": 2})
    containers = out["spec"]["template"]["spec"]["containers"]
    # All: the fewest devices a node offers and one whole node of the class.
    assert containers[0]["resources"]["limits"] == {"dra:gpus": "8", "dra:nic": "2",
                                                    "dra:nic/all": "1"}
    assert "resources" not in containers[1]
    assert "resources" not in job["spec"]["template"]["spec"]["containers"][0]
