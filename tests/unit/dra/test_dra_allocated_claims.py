"""Devices held by allocated ResourceClaims are not free now (policies/dra/allocated.py).

ResourceClaims are plain dicts shaped as `k8s.io/api/resource/v1/types.go` defines
them: `ResourceClaimStatus.allocation` (`AllocationResult`) with `devices.results[]`
(`DeviceRequestAllocationResult`: `request`, `driver`, `pool`, `device`, `adminAccess`).
Nodes and slices as in test_device_view.py: 4 nodes x 8 devices, no extended resources.
"""

from __future__ import annotations

from typing import Any

import pytest
from builders.devices import CLASS, DRIVER, NAMESPACE, Sink, listed

from gangkeeper.policies.cluster.fleet import Fleet
from gangkeeper.policies.cluster.node_facts import node_fields, read_node
from gangkeeper.policies.dra.allocated import allocated_node, held_devices
from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.fit.feasibility import check_gang, fits_now
from gangkeeper.policies.model import Gang, Role, Source
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.kube.device_view import DeviceView, with_device_names
from gangkeeper.webhook.kube.informer import object_key as key


def claim(name: str, node: str, devices: int, *, pod_owner: bool = False,
          admin: bool = False) -> dict[str, Any]:
    """A ResourceClaim allocated `devices` devices of `node`'s pool (the slices' pool
    is named after the node)."""
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if pod_owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                    "uid": "uid-p", "controller": True}]
    results = [{"request": "gpus", "driver": DRIVER, "pool": node, "device": f"gpu-{i}",
                **({"adminAccess": True} if admin else {})} for i in range(devices)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": {"devices": {"requests": [
                {"name": "gpus", "exactly": {"deviceClassName": CLASS, "count": devices}}]}},
            "status": {"allocation": {"devices": {"results": results}}}}  # fmt: skip


def test_an_allocated_claim_no_pod_owns_holds_its_devices() -> None:
    assert held_devices(claim("c", "dra-node-0", 2)) == {
        (DRIVER, "dra-node-0", "gpu-0"), (DRIVER, "dra-node-0", "gpu-1")}


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(claim("c", "dra-node-0", 8, pod_owner=True), id="made-for-one-pod"),
        pytest.param(claim("c", "dra-node-0", 8, admin=True), id="admin-access"),
        pytest.param({**claim("c", "dra-node-0", 8), "status": {}}, id="not-allocated"),
    ],
)
def test_claims_whose_devices_are_counted_elsewhere_or_taken_from_none_hold_nothing(
    obj: dict[str, Any],
) -> None:
    assert held_devices(obj) == frozenset()


def test_a_malformed_allocation_is_an_error_naming_the_claim_and_field() -> None:
    bad = claim("c", "dra-node-0", 1)
    del bad["status"]["allocation"]["devices"]["results"][0]["pool"]
    with pytest.raises(InvalidObject) as caught:
        held_devices(bad)
    assert "ResourceClaim c: status.allocation.devices.results[0].pool" in str(caught.value)


def four_by_eight() -> Gang:
    return Gang(NAMESPACE, "g", 4, (Role("worker", 4, {f"dra:{CLASS}": 8}),),
                Source("batch/v1", "Job", NAMESPACE, "g"))


def view_with(*claims: dict[str, Any]) -> tuple[DeviceView, Sink]:
    sink = Sink()
    view = DeviceView(sink)
    listed(view, sink)
    for obj in claims:
        view.claims.upsert(obj)
    view.claims.relisted({key(o) for o in claims})
    return view, sink


def test_a_claim_allocated_with_no_pod_makes_its_node_not_free_now_but_the_gang_could_run(
) -> None:
    # Before claims were read, node 0 looked free and a 4 x 8 gang was released into
    # devices another claim held.
    _view, sink = view_with(claim("other-job", "dra-node-0", 8))
    config = with_device_names(Config())
    nodes = [node_fields(n) for n in sink.nodes.values()]
    fleet = Fleet([n for n in nodes if n is not None], [], config)
    # Its whole node is held too: a request of allocationMode All cannot take it.
    assert fleet.free("dra-node-0") == {f"dra:{CLASS}": 0, f"dra:{CLASS}/all": 0}
    assert fleet.free("dra-node-1") == {f"dra:{CLASS}": 8, f"dra:{CLASS}/all": 1}
    assert fits_now(four_by_eight(), fleet.capacity) is False
    assert check_gang(four_by_eight(), fleet.capacity).allowed is True  # could ever run
    assert read_node(sink.nodes["dra-node-0"], config).gpus == {f"dra:{CLASS}": 8,
                                                                f"dra:{CLASS}/all": 1}


def test_a_claim_made_for_a_pod_is_left_to_the_pod_and_a_deallocated_one_frees_its_node(
) -> None:
    view, sink = view_with(claim("pods-own", "dra-node-0", 8, pod_owner=True))
    config = with_device_names(Config())
    assert read_node(sink.nodes["dra-node-0"], config).held == {}
    held = claim("other-job", "dra-node-1", 3)
    view.claims.upsert(held)
    # Its whole node (All requests) is taken too, by `assigner.whole_nodes` from these.
    assert read_node(sink.nodes["dra-node-1"], config).held == {f"dra:{CLASS}": 3}
    view.claims.upsert({**held, "status": {}})
    assert read_node(sink.nodes["dra-node-1"], config).held == {}


def test_a_claim_change_that_holds_no_new_device_passes_no_node_on_again() -> None:
    # Claims made for pods change with every pod: they must not recompute every Node.
    view, sink = view_with()
    before = sink.upserts
    for i in range(5):
        view.claims.upsert(claim(f"pod-claim-{i}", "dra-node-0", 8, pod_owner=True))
    assert sink.upserts == before


def _allocated(selector: object) -> dict[str, Any]:
    return {"metadata": {"name": "c"}, "status": {"allocation": {"nodeSelector": selector}}}


def _by_name(*names: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": list(names)}]}]}


@pytest.mark.parametrize(
    ("claim", "node"),
    [
        pytest.param({"metadata": {"name": "c"}}, "", id="not-allocated"),
        pytest.param(_allocated(_by_name("node-2")), "node-2", id="one-node-by-name"),
        pytest.param(_allocated(_by_name("node-2", "node-3")), None, id="two-nodes"),
        pytest.param(_allocated({"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "rack", "operator": "In", "values": ["r1"]}]}]}), None, id="by-label"),
        pytest.param(_allocated(None), None, id="any-node"),
    ],
)  # fmt: skip
def test_where_the_pods_of_an_allocated_claim_must_run(claim: dict[str, Any],
                                                       node: str | None) -> None:
    # AllocationResult.nodeSelector (k8s.io/api/resource/v1/types.go): the allocator
    # writes `metadata.name In [<node>]` for devices of one node's slices.
    assert allocated_node(claim) == node
