"""DRA objects for the unit tests of the live path (`kube.device_view.DeviceView`).

Plain dicts shaped as `k8s.io/api/resource/v1/types.go`: a ResourceSlice per node
(`spec.driver`, `spec.nodeName`, `spec.pool` with `generation` and
`resourceSliceCount`, `spec.devices[].name` and `attributes`), a DeviceClass with a
CEL selector, a ResourceClaimTemplate (`spec.spec.devices.requests[].exactly`), and
what the capacity's Node subscriber receives (`Sink`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangkeeper.policies.dra import read_device_class
from gangkeeper.policies.dra.extended import with_device_resources
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.kube.device_view import DeviceView
from gangkeeper.webhook.kube.informer import object_key as key

DRIVER = "gpu.example.com"
CLASS = "gpu.example.com"
NAMESPACE = "team"
#: DeviceClass `gpus`: every device of DRIVER (the pure core's tests of `dra.extended`).
GPUS = read_device_class({"metadata": {"name": "gpus"}, "spec": {
    "selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})  # fmt: skip
#: The default config counting GPUS's devices (`dra:gpus`, `dra:gpus/all`, ...) as GPUs.
GPUS_CONFIG = with_device_resources(Config(), [GPUS])


def node(name: str) -> dict[str, Any]:
    """A Node that lists no GPU: its devices are in its ResourceSlice only."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "128", "memory": "1Ti", "pods": "110"}}}  # fmt: skip


def resource_slice(node_name: str, devices: int, *, generation: int = 1,
                   product: str = "A100") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": generation,
                              "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}",
                                  "attributes": {"productName": {"string": product}}}
                                 for i in range(devices)]}}  # fmt: skip


DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": CLASS},
                "spec": {"selectors": [{"cel": {"expression":
                                                f"device.driver == '{DRIVER}'"}}]}}  # fmt: skip

TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "eight-gpus", "namespace": NAMESPACE},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpus",
                 "exactly": {"deviceClassName": CLASS, "count": 8}}]}}}}  # fmt: skip


class Sink:
    """What the capacity's Node subscriber receives, by name."""

    def __init__(self) -> None:
        self.nodes: dict[str, Mapping[str, Any]] = {}
        self.upserts = 0

    def upsert(self, obj: Mapping[str, Any]) -> None:
        self.upserts += 1
        self.nodes[obj["metadata"]["name"]] = obj

    def delete(self, obj: Mapping[str, Any]) -> None:
        self.nodes.pop(obj["metadata"]["name"], None)

    def relisted(self, keys: set[str]) -> None:
        self.nodes = {k: v for k, v in self.nodes.items() if f"/{k}" in keys}

    def gpus(self, name: str) -> str | None:
        return self.nodes[name]["status"]["allocatable"].get(f"dra:{CLASS}")


def listed(view: DeviceView, sink: Sink, nodes: int = 4, per_node: int = 8) -> None:
    """The informers' first lists, Nodes first (their order is not fixed)."""
    names = [f"dra-node-{i}" for i in range(nodes)]
    for name in names:
        view.upsert(node(name))
    view.relisted({key(node(name)) for name in names})
    slices = [resource_slice(name, per_node) for name in names]
    for obj in slices:
        view.slices.upsert(obj)
    view.slices.relisted({key(o) for o in slices})
    view.classes.upsert(DEVICE_CLASS)
    view.classes.relisted({key(DEVICE_CLASS)})
    view.templates.upsert(TEMPLATE)
    view.templates.relisted({key(TEMPLATE)})
