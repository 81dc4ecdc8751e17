"""GPUs through Dynamic Resource Allocation on the real control plane (issue 27).

The module's own 4 kwok nodes list no GPU in their allocatable; their 8 devices each
are in ResourceSlices the test publishes as a DRA driver's kubelet plugin would
(webhook/sandbox/devices.py: driver of this module's own, one complete pool per
node, `nodeName`, owned by the Node), selected by a DeviceClass of the module's own.
Workers ask 8 devices each through a ResourceClaimTemplate. kube-controller-manager's
resourceclaim-controller makes each pod's claim, kube-scheduler's DynamicResources
plugin allocates it, and kwok runs the pod: no driver prepares anything.

- 5 x 8 devices on 4 x 8 is refused at creation and on `--dry-run=server`, naming 40
  and 32 (the admission view counts the slices' devices and the claims' demand);
- 4 x 8 waits gated, none bound, while one node's devices are allocated to another
  pod's claim, and binds whole (four nodes, four allocated claims) once that pod goes
  (the controller counts devices: nodes from the slices, bound pods' claims as used),
  each member pinned to a node where its devices were free and bound there;
- a class selecting `productName == "H100"` (CEL, on two of four nodes) refuses 3 x 8
  naming 24 and 16, and admits 2 x 8; 3 x 8 of the driver's class passes;
- a class with `extendedResourceName: nvidia.com/gpu` on nodes listing no such
  resource: plain `nvidia.com/gpu: 8` workers count its devices, 5 x 8 refused with
  40 and 32, 4 x 8 released pinned and bound one per node (kube-scheduler serves the
  resource from the devices, DRAExtendedResource);
- a pool of two DRA and two device-plugin nodes counts each kind as its own (3 x 8
  of either refused with 24 and 16), and a 2 x 8 gang of each binds on its kind;
- a cluster in transition: two device-plugin nodes and two DRA nodes whose class
  serves `nvidia.com/gpu`. Plain `nvidia.com/gpu: 8` workers count both kinds: 4 x 8
  is admitted at creation and binds whole across all four (counting the device-plugin
  nodes alone, as gangkeeper did before KEP-5004 was modelled, refused it with 32
  and 16: a false rejection of a job that runs), and 5 x 8 is refused at creation
  with 40 and 32;
- a shared ResourceClaim (`resourceClaimName`) counts once: 4 x 8 own devices plus a
  shared 8 is refused with 40 and 32, and five workers sharing one claim of 8 are
  admitted, pinned together to one node where its devices are free, and run there;
- a node's devices allocated to a shared claim (which no pod's limits count) keep a
  4 x 8 gang gated, none bound, until the claim's pod goes and the claim is
  deallocated; then it binds whole;
- so do the devices of a claim allocated with no pod at all (its status written as a
  driver may write it), until the claim is deleted.
- a gang whose claims ask `allocationMode: All` is refused 3 on 2 nodes, and 2 are
  released pinned, one member per node (each takes the node's whole class), and bind
  there;
- a request narrowing the driver's class with selectors of its own (productName H100,
  on two of four nodes) refuses 3 x 8 with 24 and 16, and 2 x 8 is pinned to the two
  H100 nodes and binds there.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from builders.cluster import POOL_LABEL, indexed_job, unique
from builders.controllers import pinned_node
from kubernetes.client.exceptions import ApiException

from gangkeeper.policies.names import GATE
from gangkeeper.webhook.sandbox.devices import device_class, publish, resource_slice

pytestmark = pytest.mark.e2e

NODES, DEVICES = 4, 8
#: How long a gang that must wait is watched for a wrong release.
WAIT_SECONDS = 10.0


class Fleet:
    """This module's DRA nodes, driver, class and pool label."""

    def __init__(self, cluster: Any, products: tuple[str, ...] = ("A100",) * NODES,
                 extended_resource_name: str = "") -> None:
        self.pool = unique("dra")
        self.driver = f"{self.pool}.example.com"
        self.device_class = self.pool
        capacity = {"cpu": "128", "memory": "1Ti", "pods": "110"}
        self.nodes = cluster.create_gpu_nodes(
            self.pool, len(products), 0, labels={POOL_LABEL: self.pool}, capacity=capacity
        )
        publish(cluster.api_client, [
            device_class(self.device_class, driver=self.driver,
                         extended_resource_name=extended_resource_name),
            *(resource_slice(name, DEVICES, driver=self.driver,
                             attributes={"productName": product})
              for name, product in zip(self.nodes, products, strict=True)),
        ])
        self.classes = [self.device_class]
        #: Device-plugin nodes of the same pool (`mixed_kinds`).
        self.gpu_nodes: list[str] = []

    def add_class(self, cluster: Any, name: str, expression: str) -> str:
        """A second DeviceClass of the driver's devices that `expression` accepts."""
        publish(cluster.api_client, [device_class(name, driver=self.driver,
                                                  expression=expression)])
        self.classes.append(name)
        return name

    def template(self, namespace: str, device_class: str = "",
                 name: str = "eight-gpus") -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpus", "exactly": {
                        "deviceClassName": device_class or self.device_class,
                        "count": DEVICES}}]}}}}  # fmt: skip

    def pod_spec(self, template: str = "eight-gpus") -> dict[str, Any]:
        return {"restartPolicy": "Never", "nodeSelector": {POOL_LABEL: self.pool},
                "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": template}],
                "containers": [{"name": "trainer", "image": "registry.invalid/e2e/trainer:1",
                                "resources": {"claims": [{"name": "gpus"}]}}]}  # fmt: skip

    def job(self, name: str, namespace: str, workers: int,
            template: str = "eight-gpus") -> dict[str, Any]:
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"completionMode": "Indexed", "completions": workers,
                         "parallelism": workers, "backoffLimit": 0,
                         "template": {"spec": self.pod_spec(template)}}}  # fmt: skip

    def delete_classes(self, cluster: Any) -> None:
        # The slices go with their Nodes (ownerReferences) at the session's end.
        for name in self.classes:
            with contextlib.suppress(ApiException):
                cluster.custom.delete_cluster_custom_object(
                    "resource.k8s.io", "v1", "deviceclasses", name)


@pytest.fixture(scope="module")
def fleet(cluster: Any) -> Iterator[Fleet]:
    made = Fleet(cluster)
    yield made
    made.delete_classes(cluster)


@pytest.fixture(scope="module")
def serving_nvidia_gpus(cluster: Any) -> Iterator[Fleet]:
    """Four nodes of 8 devices whose class serves `nvidia.com/gpu` (extendedResourceName):
    the nodes list no `nvidia.com/gpu`, so kube-scheduler serves it from the devices."""
    made = Fleet(cluster, extended_resource_name="nvidia.com/gpu")
    yield made
    made.delete_classes(cluster)


@pytest.fixture(scope="module")
def mixed_kinds(cluster: Any) -> Iterator[Fleet]:
    """One pool of two DRA nodes (8 devices each) and two device-plugin nodes (8
    `nvidia.com/gpu` in their allocatable each); the class serves no extended name."""
    made = Fleet(cluster, ("A100", "A100"))
    made.gpu_nodes = cluster.create_gpu_nodes(f"{made.pool}-plugin", 2, 8,
                                              labels={POOL_LABEL: made.pool})
    yield made
    made.delete_classes(cluster)


@pytest.fixture(scope="module")
def in_transition(cluster: Any) -> Iterator[Fleet]:
    """A pool moving from the device plugin to a DRA driver: two nodes with 8
    `nvidia.com/gpu` in their allocatable, two with 8 devices of a class that serves
    `nvidia.com/gpu` (extendedResourceName) and no such allocatable."""
    made = Fleet(cluster, ("A100", "A100"), extended_resource_name="nvidia.com/gpu")
    made.gpu_nodes = cluster.create_gpu_nodes(f"{made.pool}-plugin", 2, 8,
                                              labels={POOL_LABEL: made.pool})
    yield made
    made.delete_classes(cluster)


@pytest.fixture(scope="module")
def mixed_products(cluster: Any) -> Iterator[Fleet]:
    """Two nodes of 8 H100s, two of 8 A100s, one driver."""
    made = Fleet(cluster, ("H100", "H100", "A100", "A100"))
    yield made
    made.delete_classes(cluster)


def apply(cluster: Any, obj: dict[str, Any], *extra: str, check: bool = True) -> Any:
    return cluster.kubectl("apply", *extra, "-f", "-", input=yaml.safe_dump(obj), check=check)


def pods_of(cluster: Any, namespace: str, job: str) -> list[Any]:
    return cluster.core.list_namespaced_pod(
        namespace, label_selector=f"batch.kubernetes.io/job-name={job}").items


def described(cluster: Any, namespace: str, job: str) -> str:
    """The Job's pods' gates, nodes, pins and scheduling conditions, and the Events."""
    lines = [f"{p.metadata.name}: gates={[g.name for g in p.spec.scheduling_gates or ()]} "
             f"node={p.spec.node_name} selector={p.spec.node_selector} "
             f"conditions={[(c.type, c.reason, c.message) for c in p.status.conditions or ()]}"
             for p in pods_of(cluster, namespace, job)]
    events = cluster.kubectl("get", "events", "-n", namespace, check=False).stdout
    return "\n".join([*lines, events])


def gated(pod: Any) -> bool:
    return any(g.name == GATE for g in pod.spec.scheduling_gates or ())


def job_held_whole(cluster: Any, fleet: Fleet, namespace: str, prefix: str, why: str) -> str:
    """A Job of NODES workers of 8 devices created in `namespace`; none of its pods may
    be released or bound for WAIT_SECONDS (`why`: what holds node 0's devices). Its name."""
    apply(cluster, fleet.template(namespace))
    name = unique(prefix)
    assert apply(cluster, fleet.job(name, namespace, NODES)).returncode == 0
    cluster.wait_for(lambda: len(pods_of(cluster, namespace, name)) == NODES,
                     timeout=60.0, message=f"the Job's {NODES} pods")
    with contextlib.suppress(AssertionError):
        cluster.wait_for(
            lambda: any(not gated(p) or p.spec.node_name
                        for p in pods_of(cluster, namespace, name)),
            timeout=WAIT_SECONDS, message="(expected to time out)",
        )
    early = [p.metadata.name for p in pods_of(cluster, namespace, name)
             if not gated(p) or p.spec.node_name]
    assert early == [], f"released or bound while {why}: {early}"
    return name


def all_bound(cluster: Any, namespace: str, name: str, count: int, message: str, *,
              detail: Callable[[], str] = str) -> list[Any]:
    """The Job's pods once all `count` are bound; on time-out the test fails with
    `detail()`, the pods' gates, nodes and conditions, and the Events."""
    def bound() -> bool:
        pods = pods_of(cluster, namespace, name)
        return len(pods) == count and all(p.spec.node_name for p in pods)

    try:
        cluster.wait_for(bound, timeout=90.0, message=message)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {detail()}\n{described(cluster, namespace, name)}"
                             ) from None
    return pods_of(cluster, namespace, name)


def refused_with_numbers(done: Any, demand: int = 40, offered: int = 32) -> str:
    assert done.returncode != 0, f"admitted a gang that can never fit:\n{done.stdout}"
    message = done.stderr
    assert "denied the request" in message, message
    assert re.search(rf"\b{demand}\b", message), message
    assert re.search(rf"\b{offered}\b", message), message
    return str(message)


def test_five_workers_of_eight_devices_on_four_nodes_of_eight_are_refused_with_the_numbers(
    cluster: Any, gang_namespace: str, fleet: Fleet
) -> None:
    apply(cluster, fleet.template(gang_namespace))
    huge = fleet.job(unique("huge"), gang_namespace, NODES + 1)

    # The webhook's view learns the slices, class and template from its watches.
    cluster.wait_for(
        lambda: apply(cluster, huge, "--dry-run=server", check=False).returncode != 0,
        timeout=30.0, message="the webhook counting the DRA devices",
    )
    refused_with_numbers(apply(cluster, huge, "--dry-run=server", check=False))
    message = refused_with_numbers(cluster.kubectl(
        "create", "-f", "-", input=yaml.safe_dump(huge), check=False))
    assert f"devices of DeviceClass {fleet.device_class}" in message, message
    assert "dra:" not in message, message  # the internal name is never shown
    got = cluster.kubectl("get", "job", huge["metadata"]["name"], "-n", gang_namespace,
                          check=False)
    assert "NotFound" in got.stderr, "a refused Job was created"


def test_four_workers_wait_gated_while_a_node_s_devices_are_claimed_then_bind_whole(
    cluster: Any, gang_namespace: str, plain_namespace: str, fleet: Fleet
) -> None:
    # Another pod, of no gang, holds node 0's 8 devices through its own claim.
    apply(cluster, fleet.template(plain_namespace))
    other = {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "other", "namespace": plain_namespace},
             "spec": {**fleet.pod_spec(),
                      "nodeSelector": {"kubernetes.io/hostname": fleet.nodes[0]}}}  # fmt: skip
    apply(cluster, other)
    cluster.wait_for(
        lambda: cluster.core.read_namespaced_pod("other", plain_namespace).status.phase
        == "Running",
        timeout=60.0, message="the other pod bound with its claim allocated and running",
    )

    # Three nodes are free, the gang needs four: nothing may go meanwhile.
    name = job_held_whole(cluster, fleet, gang_namespace, "fits",
                          "a node's devices were claimed")

    cluster.core.delete_namespaced_pod("other", plain_namespace, grace_period_seconds=0)
    pods = all_bound(cluster, gang_namespace, name, NODES, "all four workers bound")
    assert sorted(p.spec.node_name for p in pods) == sorted(fleet.nodes)
    # Released as a placement (before: unpinned, "DRA resourceClaims"): each member
    # pinned where its devices were free, and bound there.
    assert all(pinned_node(p) == p.spec.node_name for p in pods), described(
        cluster, gang_namespace, name)
    claims = cluster.custom.list_namespaced_custom_object(
        "resource.k8s.io", "v1", gang_namespace, "resourceclaims")["items"]
    allocated = [c for c in claims if (c.get("status") or {}).get("allocation")]
    assert len(allocated) == NODES, [c["metadata"]["name"] for c in claims]


def test_a_class_of_h100s_present_on_two_nodes_only_refuses_three_workers_of_eight(
    cluster: Any, gang_namespace: str, mixed_products: Fleet
) -> None:
    fleet = mixed_products
    h100 = fleet.add_class(
        cluster, f"{fleet.pool}-h100",
        f'device.attributes["{fleet.driver}"].productName == "H100"')
    apply(cluster, fleet.template(gang_namespace, h100, name="eight-h100s"))
    apply(cluster, fleet.template(gang_namespace))
    three_h100 = fleet.job(unique("h100"), gang_namespace, 3, template="eight-h100s")
    cluster.wait_for(
        lambda: apply(cluster, three_h100, "--dry-run=server", check=False).returncode != 0,
        timeout=30.0, message="the webhook counting the H100 class",
    )
    message = refused_with_numbers(
        apply(cluster, three_h100, "--dry-run=server", check=False), demand=24, offered=16)
    assert f"devices of DeviceClass {h100}" in message, message
    # The same three workers of any of the driver's devices fit on the four nodes.
    any_gpu = fleet.job(unique("any"), gang_namespace, 3)
    assert apply(cluster, any_gpu, "--dry-run=server", check=False).returncode == 0
    two_h100 = fleet.job(unique("h100"), gang_namespace, 2, template="eight-h100s")
    assert apply(cluster, two_h100, "--dry-run=server", check=False).returncode == 0


def test_a_request_selecting_h100s_itself_refuses_three_workers_and_pins_two_on_the_h100_nodes(
    cluster: Any, gang_namespace: str, mixed_products: Fleet
) -> None:
    # The same H100s asked through the request's own selectors (`exactly.selectors`)
    # of the driver's class: counted per node (dra:<class>#<hash>), refused 3 x 8 with
    # 24 and 16, and 2 x 8 released pinned to the two H100 nodes, bound there. Before:
    # counted live but released unpinned ("selectors of its own").
    fleet = mixed_products
    template = fleet.template(gang_namespace, name="own-h100s")
    request = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    request["selectors"] = [{"cel": {
        "expression": f'device.attributes["{fleet.driver}"].productName == "H100"'}}]
    apply(cluster, template)
    three = fleet.job(unique("own"), gang_namespace, 3, template="own-h100s")
    cluster.wait_for(
        lambda: apply(cluster, three, "--dry-run=server", check=False).returncode != 0,
        timeout=30.0, message="the webhook counting the request's own selectors",
    )
    refused_with_numbers(apply(cluster, three, "--dry-run=server", check=False),
                         demand=24, offered=16)
    name = unique("own")
    assert apply(cluster, fleet.job(name, gang_namespace, 2, template="own-h100s")
                 ).returncode == 0
    pods = all_bound(cluster, gang_namespace, name, 2, "both H100 workers bound")
    assert sorted(p.spec.node_name for p in pods) == sorted(fleet.nodes[:2])
    assert all(pinned_node(p) == p.spec.node_name for p in pods), described(
        cluster, gang_namespace, name)


# --- shared ResourceClaims (policies/dra/shared.py, policies/dra/allocated.py) -------


@pytest.fixture(scope="module")
def shared_fleet(cluster: Any) -> Iterator[Fleet]:
    """Four more nodes of 8 devices, for the shared-claim scenarios."""
    made = Fleet(cluster)
    yield made
    made.delete_classes(cluster)


@pytest.fixture(scope="module")
def holding_fleet(cluster: Any) -> Iterator[Fleet]:
    """Four more nodes of 8 devices, one of which a shared claim will hold."""
    made = Fleet(cluster)
    yield made
    made.delete_classes(cluster)


def shared_claim(fleet: Fleet, name: str, namespace: str, count: int = DEVICES
                 ) -> dict[str, Any]:
    """A ResourceClaim (resource.k8s.io/v1) that pods share by `resourceClaimName`."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                "deviceClassName": fleet.device_class, "count": count}}]}}}  # fmt: skip


def sharing(spec: dict[str, Any], claim: str, *, own: bool) -> dict[str, Any]:
    """`spec` whose container also uses the shared `claim`; without `own`, only it."""
    claims = [*(spec["resourceClaims"] if own else ()),
              {"name": "shared", "resourceClaimName": claim}]
    container = {**spec["containers"][0], "resources": {
        "claims": [{"name": c["name"]} for c in claims]}}
    return {**spec, "resourceClaims": claims, "containers": [container]}


def claim_of(cluster: Any, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = cluster.custom.get_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaims", name)
    return found


def test_a_shared_resource_claim_used_by_all_members_counts_once(
    cluster: Any, gang_namespace: str, shared_fleet: Fleet
) -> None:
    fleet = shared_fleet
    rack = unique("rack")
    apply(cluster, shared_claim(fleet, rack, gang_namespace))
    apply(cluster, fleet.template(gang_namespace))
    # 4 x 8 devices of their own and the shared claim's 8 once: 40 on 32. Before shared
    # claims were counted this Job was admitted (its claim's devices were not seen).
    over = fleet.job(unique("over"), gang_namespace, NODES)
    over["spec"]["template"]["spec"] = sharing(over["spec"]["template"]["spec"], rack, own=True)
    cluster.wait_for(
        lambda: apply(cluster, over, "--dry-run=server", check=False).returncode != 0,
        timeout=30.0, message="the webhook counting the shared claim",
    )
    message = refused_with_numbers(apply(cluster, over, "--dry-run=server", check=False))
    assert f"devices of DeviceClass {fleet.device_class}" in message, message

    # Five workers sharing the one claim of 8: 8 devices, not 5 x 8 = 40. Admitted, and
    # all five run on the node the claim is allocated on.
    name = unique("together")
    together = fleet.job(name, gang_namespace, NODES + 1)
    together["spec"]["template"]["spec"] = sharing(
        together["spec"]["template"]["spec"], rack, own=False)
    done = apply(cluster, together)
    assert done.returncode == 0, done.stderr

    pods = all_bound(cluster, gang_namespace, name, NODES + 1, "the five workers bound")
    nodes = {p.spec.node_name for p in pods}
    results = claim_of(cluster, gang_namespace, rack)["status"]["allocation"]["devices"]["results"]
    assert len(nodes) == 1 and len(results) == DEVICES, (nodes, results)
    # Released pinned together (policies/release/shared_claims.py): to one node where
    # the claim's 8 devices were free, allocated there with the first bound. Before:
    # released unpinned ("shared ResourceClaim ... its allocation decides the node").
    assert all(pinned_node(p) == p.spec.node_name for p in pods), described(
        cluster, gang_namespace, name)


def test_a_node_s_devices_held_by_a_shared_claim_keep_a_gang_waiting_until_it_is_freed(
    cluster: Any, gang_namespace: str, plain_namespace: str, holding_fleet: Fleet
) -> None:
    fleet = holding_fleet
    # A pod of no gang on node 0 uses a shared claim of 8: the claim, not the pod's
    # limits, says node 0's devices are taken (a claim no Pod owns holds them).
    held = unique("held")
    apply(cluster, shared_claim(fleet, held, plain_namespace))
    holder = {"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "holder", "namespace": plain_namespace},
              "spec": {**sharing(fleet.pod_spec(), held, own=False),
                       "nodeSelector": {"kubernetes.io/hostname": fleet.nodes[0]}}}  # fmt: skip
    apply(cluster, holder)
    cluster.wait_for(
        lambda: (claim_of(cluster, plain_namespace, held).get("status") or {}).get(
            "allocation") is not None
        and cluster.core.read_namespaced_pod("holder", plain_namespace).spec.node_name,
        timeout=60.0, message="the shared claim allocated on node 0 and its pod bound",
    )

    # Before allocated claims were read, node 0 looked free and all four were released:
    # one stayed Pending while three held their devices.
    name = job_held_whole(cluster, fleet, gang_namespace, "waits",
                          "a shared claim held node 0's devices")

    # The pod goes; the claim controller deallocates the claim no one uses any more.
    cluster.core.delete_namespaced_pod("holder", plain_namespace, grace_period_seconds=0)
    def claim_status() -> str:
        return f"claim status {claim_of(cluster, plain_namespace, held).get('status')}"

    pods = all_bound(cluster, gang_namespace, name, NODES, "all four workers bound",
                     detail=claim_status)
    assert sorted(p.spec.node_name for p in pods) == sorted(fleet.nodes)


@pytest.fixture(scope="module")
def allocated_fleet(cluster: Any) -> Iterator[Fleet]:
    """Four more nodes of 8 devices, one of which a claim with no pod holds."""
    made = Fleet(cluster)
    yield made
    made.delete_classes(cluster)


def test_a_claim_allocated_with_no_pod_keeps_its_node_s_devices_from_a_gang(
    cluster: Any, gang_namespace: str, plain_namespace: str, allocated_fleet: Fleet
) -> None:
    fleet = allocated_fleet
    # Allocated as a DRA driver or a tool may do it, with no consumer: the claim
    # controller deallocates only a claim whose last consumer went, so it stays.
    name = unique("reserved")
    apply(cluster, shared_claim(fleet, name, plain_namespace))
    allocation = {"status": {"allocation": {"devices": {"results": [
        {"request": "gpus", "driver": fleet.driver, "pool": fleet.nodes[0],
         "device": device} for device in _devices(cluster, fleet.nodes[0])]}}}}  # fmt: skip
    patched = cluster.kubectl("patch", "resourceclaim", name, "-n", plain_namespace,
                              "--subresource=status", "--type=merge",
                              "-p", yaml.safe_dump(allocation), check=False)
    assert patched.returncode == 0, patched.stderr

    job = job_held_whole(cluster, fleet, gang_namespace, "waits",
                         "a claim with no pod held node 0's devices")

    cluster.custom.delete_namespaced_custom_object(
        "resource.k8s.io", "v1", plain_namespace, "resourceclaims", name)
    all_bound(cluster, gang_namespace, job, NODES, "all four workers bound")


def _devices(cluster: Any, node: str) -> list[str]:
    """The device names of `node`'s ResourceSlices."""
    slices = cluster.custom.list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices")["items"]
    return [d["name"] for s in slices if s["spec"].get("nodeName") == node
            for d in s["spec"].get("devices") or ()]  # fmt: skip


def test_plain_nvidia_gpu_workers_are_counted_on_devices_of_a_class_serving_that_resource(
    cluster: Any, gang_namespace: str, serving_nvidia_gpus: Fleet
) -> None:
    fleet = serving_nvidia_gpus
    huge = indexed_job(unique("huge"), gang_namespace, fleet.pool, workers=NODES + 1, gpus=8)
    # Before: counted as nodes with no nvidia.com/gpu, every such Job was refused.
    cluster.wait_for(
        lambda: "32" in apply(cluster, huge, "--dry-run=server", check=False).stderr,
        timeout=30.0, message="the webhook counting the class's devices as nvidia.com/gpu",
    )
    refused_with_numbers(apply(cluster, huge, "--dry-run=server", check=False))
    name = unique("fits")
    fits = indexed_job(name, gang_namespace, fleet.pool, workers=NODES, gpus=8)
    assert apply(cluster, fits).returncode == 0

    pods = all_bound(cluster, gang_namespace, name, NODES, "all four workers bound")
    assert sorted(p.spec.node_name for p in pods) == sorted(fleet.nodes)


def test_a_mixed_fleet_counts_device_plugin_gpus_and_dra_devices_each_as_their_own(
    cluster: Any, gang_namespace: str, mixed_kinds: Fleet
) -> None:
    fleet = mixed_kinds
    apply(cluster, fleet.template(gang_namespace))
    three_dra = fleet.job(unique("dra"), gang_namespace, 3)
    cluster.wait_for(
        lambda: apply(cluster, three_dra, "--dry-run=server", check=False).returncode != 0,
        timeout=30.0, message="the webhook counting the mixed pool's devices",
    )
    # Neither kind is counted as the other: 2 nodes of each, 16 of each.
    refused_with_numbers(apply(cluster, three_dra, "--dry-run=server", check=False),
                         demand=24, offered=16)
    three_gpu = indexed_job(unique("gpu"), gang_namespace, fleet.pool, workers=3, gpus=8)
    message = refused_with_numbers(
        apply(cluster, three_gpu, "--dry-run=server", check=False), demand=24, offered=16)
    assert "nvidia.com/gpu" in message, message

    dra_name, gpu_name = unique("dra"), unique("gpu")
    apply(cluster, fleet.job(dra_name, gang_namespace, 2))
    apply(cluster, indexed_job(gpu_name, gang_namespace, fleet.pool, workers=2, gpus=8))

    def bound(job: str) -> list[str]:
        return sorted(p.spec.node_name or "" for p in pods_of(cluster, gang_namespace, job))

    cluster.wait_for(lambda: all(bound(dra_name)) and len(bound(dra_name)) == 2
                     and all(bound(gpu_name)) and len(bound(gpu_name)) == 2,
                     timeout=90.0, message="both gangs bound")
    assert bound(dra_name) == sorted(fleet.nodes)
    assert bound(gpu_name) == sorted(fleet.gpu_nodes)


def test_a_cluster_in_transition_counts_plugin_gpus_and_devices_serving_them_together(
    cluster: Any, gang_namespace: str, in_transition: Fleet
) -> None:
    fleet = in_transition
    name = unique("both")
    fits = indexed_job(name, gang_namespace, fleet.pool, workers=NODES, gpus=8)
    # Until the webhook's informers have seen the four Nodes, their slices and the
    # class, it counts fewer; a count of the plugin nodes alone says 32 and 16.
    cluster.wait_for(
        lambda: apply(cluster, fits, "--dry-run=server", check=False).returncode == 0,
        timeout=30.0, message="the webhook counting both kinds as nvidia.com/gpu",
    )
    done = apply(cluster, fits, check=False)
    assert done.returncode == 0, f"a 4 x 8 job that runs was refused:\n{done.stderr}"
    pods = all_bound(cluster, gang_namespace, name, NODES, "all four workers bound")
    assert sorted(p.spec.node_name for p in pods) == sorted([*fleet.nodes, *fleet.gpu_nodes])

    huge = indexed_job(unique("huge"), gang_namespace, fleet.pool, workers=NODES + 1, gpus=8)
    message = refused_with_numbers(apply(cluster, huge, check=False))
    assert "nvidia.com/gpu" in message, message
    assert not pods_of(cluster, gang_namespace, huge["metadata"]["name"])


@pytest.fixture(scope="module")
def pair(cluster: Any) -> Iterator[Fleet]:
    """Two nodes of 8 devices, for a gang the count cannot pin."""
    made = Fleet(cluster, ("A100", "A100"))
    yield made
    made.delete_classes(cluster)


def test_a_gang_whose_claims_ask_every_device_is_pinned_one_member_per_node_and_binds_whole(
    cluster: Any, gang_namespace: str, pair: Fleet
) -> None:
    # `allocationMode: All` takes every device of the class on its node: each member
    # asks the node's one whole node of the class (policies/assigner/whole_nodes.py),
    # so it is pinned to a node of its own and binds there. Before: released unpinned
    # with a GangReleasedUnpinned Event naming allocationMode All.
    every = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
             "metadata": {"name": "every-gpu", "namespace": gang_namespace},
             "spec": {"spec": {"devices": {"requests": [
                 {"name": "gpus", "exactly": {"deviceClassName": pair.device_class,
                                              "allocationMode": "All"}}]}}}}  # fmt: skip
    apply(cluster, every)
    name = unique("every")
    job = pair.job(name, gang_namespace, 2, template="every-gpu")
    # The pair's Nodes and slices were made just now: until the webhook's informers
    # have seen both, it counts one node of 8 and refuses 16 (CI saw "1 node: 8").
    cluster.wait_for(
        lambda: apply(cluster, job, "--dry-run=server", check=False).returncode == 0,
        timeout=30.0, message="the webhook counting both of the pair's nodes",
    )
    three = pair.job(unique("every"), gang_namespace, 3, template="every-gpu")
    refused_with_numbers(apply(cluster, three, "--dry-run=server", check=False),
                         demand=3, offered=2)
    apply(cluster, job)

    pods = all_bound(cluster, gang_namespace, name, 2, "both workers bound")
    assert sorted(p.spec.node_name for p in pods) == sorted(pair.nodes)
    assert all(pinned_node(p) == p.spec.node_name for p in pods), described(
        cluster, gang_namespace, name)
    # Read through core/v1: the scheduler's own Events have no eventTime, which the
    # client's events.k8s.io model refuses. The unpinned release's Event regards the
    # members; none may say these were released without pins.
    members = {p.metadata.name for p in pods}
    unpinned = [e.message for e in cluster.core.list_namespaced_event(gang_namespace).items
                if e.reason == "GangReleasedUnpinned" and e.involved_object.name in members]
    assert unpinned == [], unpinned
