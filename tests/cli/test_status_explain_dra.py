"""`gangkeeper status` and `explain` on a DRA cluster count devices as the controller does.

`kube.device_state.with_devices` (what `cluster_state` reads with) lists ResourceSlices,
DeviceClasses, ResourceClaimTemplates and ResourceClaims (plain dicts shaped as
`k8s.io/api/resource/v1/types.go`; the claim's `status.allocation.devices.results[]`
names driver, pool and device) beside the Pods and Nodes: 4 nodes x 8 devices, one
node's 8 held by a claim no pod owns, and a gang of 4 members each claiming 8 devices
through a template.
"""

from __future__ import annotations

from typing import Any

from builders.devices import CLASS, DEVICE_CLASS, DRIVER, NAMESPACE, TEMPLATE, node, resource_slice
from builders.gangs import T0, members

from gangkeeper.policies.release.explain import Target, explain, render
from gangkeeper.policies.release.status import gang_status
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.kube.device_state import with_devices
from gangkeeper.webhook.kube.device_view import CLAIM_TEMPLATES, CLAIMS, CLASSES, SLICES
from gangkeeper.webhook.kube.fake import FakeApi

NODES = [f"dra-node-{i}" for i in range(4)]
HELD = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "other-job", "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": CLASS, "count": 8}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": DRIVER, "pool": "dra-node-0", "device": f"gpu-{i}"}
            for i in range(8)]}}}}  # fmt: skip


def dra_gang() -> list[dict[str, Any]]:
    pods = members("train", 4, gpus=0, namespace=NAMESPACE)
    for pod in pods:
        pod["spec"]["resourceClaims"] = [
            {"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}]
    return pods


def cluster() -> tuple[Config, list[dict[str, Any]], list[dict[str, Any]]]:
    api = FakeApi()
    api.seed(SLICES.path, *(resource_slice(n, 8) for n in NODES))
    api.seed(CLASSES.path, DEVICE_CLASS)
    api.seed(CLAIM_TEMPLATES.path, TEMPLATE)
    api.seed(CLAIMS.path, HELD)
    config, pods, nodes = with_devices(api, Config(), dra_gang(), [node(n) for n in NODES])
    return config, [dict(p) for p in pods], [dict(n) for n in nodes]


def test_explain_shows_a_dra_gangs_devices_asked_and_free_in_words() -> None:
    config, pods, nodes = cluster()
    text = render(explain(pods, nodes, config, T0 + 60, Target.parse("train-0", NAMESPACE)), [])
    assert f"devices of DeviceClass {CLASS}: 32" in text, text  # asked
    # Free: node 0's devices are held by the claim; 24 of 32 on the four nodes.
    assert f"Compared with: devices of DeviceClass {CLASS}: 24 free on the 4 nodes" in text, text
    assert "dra:" not in text


def test_status_says_the_dra_gang_waits_for_the_devices_a_claim_holds() -> None:
    config, pods, nodes = cluster()
    (report,) = gang_status(pods, nodes, config, T0 + 60)
    assert report.state == "waiting", report
    assert f"needs 32 devices of DeviceClass {CLASS}, 24 free" in report.reason, report.reason


def test_a_cluster_serving_no_device_class_is_read_as_it_is() -> None:
    pods, nodes = dra_gang(), [node(n) for n in NODES]
    assert with_devices(FakeApi(), Config(), pods, nodes) == (Config(), pods, nodes)
