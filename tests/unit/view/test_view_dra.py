"""`gangkeeper view` on a cluster whose GPUs are published through Dynamic Resource
Allocation (resource.k8s.io/v1): `source.reader` reads the devices as `status` and
`explain` do (`kube.device_state`), so the fleet picture draws each DRA node's devices
and a DRA gang's members ask theirs.

The cluster (`FakeApi`): 4 Nodes listing no GPU in `allocatable`, a ResourceSlice of 8
devices each, a DeviceClass and a ResourceClaimTemplate of 8 (`builders.devices`:
plain dicts shaped as `k8s.io/api/resource/v1/types.go`). Gang `run` (2 members, each
claiming 8 devices through the template) is bound on dra-node-0 and dra-node-1; gang
`train` (3 members of 8) waits for 24 devices where 16 are free.
"""

from __future__ import annotations

from typing import Any

from builders.devices import (
    CLASS,
    DEVICE_CLASS,
    DRIVER,
    NAMESPACE,
    TEMPLATE,
    node,
    resource_slice,
)
from builders.gangs import T0, members

from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.kube.api import ApiError, Call
from gangkeeper.webhook.kube.device_view import CLAIM_TEMPLATES, CLAIMS, CLASSES, SLICES
from gangkeeper.webhook.kube.fake import FakeApi
from gangkeeper.webhook.view.live import fleet_json
from gangkeeper.webhook.view.pages import fleet_page
from gangkeeper.webhook.view.source import reader
from gangkeeper.webhook.view.state import ViewState

NOW = T0 + 60
NODES = [f"dra-node-{i}" for i in range(4)]
DEVICES = f"devices of DeviceClass {CLASS}"


def claiming(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for pod in pods:
        pod["spec"]["resourceClaims"] = [
            {"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}]
    return pods


def dra_cluster(api: FakeApi | None = None) -> FakeApi:
    api = api or FakeApi()
    api.seed("/api/v1/nodes", *(node(n) for n in NODES))
    running = claiming(members("run", 2, gpus=0, namespace=NAMESPACE, gates=()))
    for pod, where in zip(running, NODES, strict=False):
        pod["spec"]["nodeName"] = where
        pod["status"]["phase"] = "Running"
    waiting = claiming(members("train", 3, gpus=0, namespace=NAMESPACE, created=T0 + 10))
    api.seed("/api/v1/pods", *running, *waiting)
    api.seed(SLICES.path, *(resource_slice(n, 8) for n in NODES))
    api.seed(CLASSES.path, DEVICE_CLASS)
    api.seed(CLAIM_TEMPLATES.path, TEMPLATE)
    return api


def snapshot(api: FakeApi) -> ViewState:
    return reader(api, Config(), clock=lambda: NOW)()


def test_the_fleet_draws_eight_devices_per_dra_node_used_by_the_bound_members() -> None:
    fleet = snapshot(dra_cluster()).fleet
    drawn = {row.name: (row.resource, {(c.kind, c.who) for c in row.cells}, len(row.cells))
             for row in fleet.nodes}
    assert drawn == {
        "dra-node-0": (DEVICES, {("gang", f"{NAMESPACE}/run")}, 8),
        "dra-node-1": (DEVICES, {("gang", f"{NAMESPACE}/run")}, 8),
        # Free, and held for the waiting gang (as free GPUs are: `_holders`).
        "dra-node-2": (DEVICES, {("held", f"{NAMESPACE}/train")}, 8),
        "dra-node-3": (DEVICES, {("held", f"{NAMESPACE}/train")}, 8),
    }
    assert {s.shape: s.gpus for s in fleet.shapes} == {f"8 x {DEVICES}": 32}


def test_a_dra_gangs_members_ask_eight_devices_each_named_in_words() -> None:
    state = snapshot(dra_cluster())
    (train,) = [r for r in state.rows if r.name == "train"]
    assert train.state == "waiting", train
    assert f"needs 24 {DEVICES}, 16 free" in train.reason, train.reason
    assert "dra:" not in train.reason
    # The fleet page and its JSON word the devices, never the internal `dra:<class>`.
    page = fleet_page(state, "t")
    assert DEVICES in page and "dra:" not in page
    assert "dra:" not in str(fleet_json(state))


class NoDra(FakeApi):
    """A user who may list Nodes and Pods but nothing of resource.k8s.io."""

    def send(self, call: Call) -> dict[str, Any]:
        if call.path.startswith("/apis/resource.k8s.io/"):
            raise ApiError(403, "Forbidden", f'{{"message": "{call.path} is forbidden"}}')
        return super().send(call)


def test_a_user_who_may_not_list_dra_objects_still_gets_the_view_and_is_told() -> None:
    state = snapshot(dra_cluster(NoDra()))
    assert {r.name for r in state.rows} == {"run", "train"}
    assert state.fleet.nodes == ()  # no GPU on the Nodes, as before
    assert any("DRA devices are not counted: cannot list resourceslices (forbidden)" in n
               for n in state.notes), state.notes


def test_devices_an_allocated_claim_holds_are_drawn_used_as_the_reason_counts_them() -> None:
    api = dra_cluster()
    # A claim no pod owns holds every device of dra-node-2 (a driver may allocate so).
    api.seed(CLAIMS.path, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "other-job", "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": CLASS, "count": 8}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": DRIVER, "pool": "dra-node-2", "device": f"gpu-{i}"}
            for i in range(8)]}}}})  # fmt: skip
    state = snapshot(api)
    (row,) = [r for r in state.fleet.nodes if r.name == "dra-node-2"]
    assert {(c.kind, c.who) for c in row.cells} == {("other", "allocated ResourceClaims")}
    assert len(row.cells) == 8
    (train,) = [r for r in state.rows if r.name == "train"]
    assert f"{DEVICES}, 8 free" in train.reason, train.reason


def test_a_node_whose_device_count_is_unknown_is_drawn_as_used_not_a_million_cells() -> None:
    api = FakeApi()
    api.seed("/api/v1/nodes", node("dra-node-0"))
    tainted = resource_slice("dra-node-0", 8)
    for device in tainted["spec"]["devices"]:  # a tainted device: the count is unknown
        device["taints"] = [{"key": "k", "effect": "NoSchedule"}]
    api.seed(SLICES.path, tainted)
    api.seed(CLASSES.path, DEVICE_CLASS)
    api.seed(CLAIM_TEMPLATES.path, TEMPLATE)
    fleet = snapshot(api).fleet
    [row] = fleet.nodes
    assert row.resource == f"{DEVICES} (how many: unknown)" and row.cells == ()
    assert all(s.gpus < 100 for s in fleet.shapes), fleet.shapes
