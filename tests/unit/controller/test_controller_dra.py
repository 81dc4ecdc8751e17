"""The controller counts DRA devices (GangController(devices=True), kube/device_view.py):
Nodes reach its store with their ResourceSlices' devices as `dra:<class>`, pods ask
their claims' devices, so a gang of 4 x 8 claimed devices on 4 nodes of 8 waits while
one node's devices are taken by a bound pod's claim, and is released whole once they
are free. Without devices it saw members asking nothing and released them at once.

Plain dicts shaped as `k8s.io/api/resource/v1` (ResourceSlice, DeviceClass,
ResourceClaimTemplate) and core/v1 `PodSpec.resourceClaims`; the controller is built,
fed as its informers would feed it, and never started (no thread, no request)."""

from __future__ import annotations

from typing import Any

from builders.gangs import T0, members, pod
from kubernetes.client import ApiClient

from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import Plan
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.controller import GangController
from gangkeeper.webhook.kube.informer import object_key

DRIVER = CLASS = "gpu.example.com"
NOW = T0 + 60


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"allocatable": {"cpu": "128", "memory": "1Ti", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip


def resource_slice(name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{name}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": name,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}"} for i in range(8)]}}  # fmt: skip


DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": CLASS},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "eight-gpus", "namespace": "team"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpus",
                 "exactly": {"deviceClassName": CLASS, "count": 8}}]}}}}  # fmt: skip


def claiming(raw: dict[str, Any]) -> dict[str, Any]:
    """The pod asking its GPUs through a claim of TEMPLATE instead of limits."""
    spec = raw["spec"]
    spec["containers"][0].pop("resources", None)
    spec["containers"][0]["resources"] = {"claims": [{"name": "gpus"}]}
    spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}]
    return raw


def controller(*, devices: bool = True) -> GangController:
    built = GangController(ApiClient(), Config(), namespace="gangkeeper-system",
                           identity="test", devices=devices)
    nodes = [node(f"dra-{i}") for i in range(4)]
    sink = built.devices or built.nodes
    for obj in nodes:
        sink.upsert(obj)
    sink.relisted({object_key(o) for o in nodes})
    if built.devices is not None:
        for store, objs in ((built.devices.slices, [resource_slice(f"dra-{i}") for i in range(4)]),
                            (built.devices.classes, [DEVICE_CLASS]),
                            (built.devices.templates, [TEMPLATE])):
            for obj in objs:
                store.upsert(obj)
            store.relisted({object_key(o) for o in objs})
    return built


def decide(built: GangController, pods: list[dict[str, Any]]) -> Plan:
    for raw in pods:
        built.pods.upsert(raw)
    return plan(built.pods.items(), built.nodes.items(), built.config, NOW)


def gang() -> list[dict[str, Any]]:
    return [claiming(p) for p in members("g", 4, gpus=8)]


def blocker() -> dict[str, Any]:
    """A running pod of no gang whose claim holds dra-0's 8 devices."""
    return claiming(pod("other", 8, gates=(), node_name="dra-0", phase="Running"))


def test_the_nodes_carry_their_slices_devices() -> None:
    built = controller()
    assert {n["metadata"]["name"]: n["status"]["allocatable"].get(f"dra:{CLASS}")
            for n in built.nodes.items()} == {f"dra-{i}": "8" for i in range(4)}


def test_a_dra_gang_waits_while_one_nodes_devices_are_claimed_then_is_released_whole() -> None:
    built = controller()
    waiting = decide(built, [blocker(), *gang()])
    assert waiting.releases == ()
    report = next(r for r in waiting.reports if r.label == "g")
    assert report.state == "waiting" and "32" in report.reason and "24" in report.reason, report
    built.pods.delete(blocker())
    freed = decide(built, [])
    assert {p.name for r in freed.releases for p in r.pods} == {"g-0", "g-1", "g-2", "g-3"}


def test_without_devices_the_controller_saw_members_asking_nothing_and_released_them() -> None:
    # What the controller did before it counted devices: the gang went at once, and
    # the scheduler bound three members and left the fourth pending.
    built = controller(devices=False)
    result = decide(built, [blocker(), *gang()])
    assert {p.name for r in result.releases for p in r.pods} == {"g-0", "g-1", "g-2", "g-3"}
