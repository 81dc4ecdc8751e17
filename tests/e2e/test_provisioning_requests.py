"""Gangs that ask through ProvisioningRequests (`autoscaling: provisioningrequest`), on the
sandbox with the real ProvisioningRequest CRD (autoscaling.x-k8s.io/v1, copied by
`deploy/sandbox/build.sh provisioning-request` from cluster-autoscaler's API module).

**cluster-autoscaler itself is not run**: the module proxy serves only its API module
(`k8s.io/autoscaler/cluster-autoscaler/apis`), not a cluster-autoscaler built against
this Kubernetes, and it has no kwok cloud provider that would add nodes here. So each
test plays cluster-autoscaler's part the way it would: it writes the request's status
conditions itself (`Provisioned`, `Failed`, `BookingExpired`, `CapacityRevoked`,
through the status subresource, as the CRD requires them) and, for `Provisioned`,
creates the kwok nodes the autoscaler would have added. Everything else is real: the
API server validates what gangkeeper creates against the CRD's schema, the garbage
collector, the scheduler and the ValidatingAdmissionPolicy see the release.

gangkeeper runs with `autoscaling: provisioningrequest`, one declared pool per test
(no node of it exists at the start), a retry wait of 1 s and one retry, and with the
ClusterRole `gangkeeper manifests --autoscaling provisioningrequest` renders (the
sandbox runs it with its install's RBAC, so a missing rule fails here).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from builders.cluster import POOL_LABEL, indexed_job
from builders.events import events_in
from builders.faults import metrics
from builders.provisioning import condition
from conftest import Cluster
from kubernetes.client.exceptions import ApiException

from gangkeeper.policies.names import (
    CONSUME_PROVISIONING_REQUEST_ANNOTATION,
    GATE,
    PROVISIONING_CLASS_ANNOTATION,
    PROVISIONING_LABEL,
    PROVISIONING_REQUEST_LABEL,
)
from gangkeeper.webhook.install import render_manifests
from gangkeeper.webhook.sandbox import BinariesMissing, find_provisioning_request_crd
from gangkeeper.webhook.sandbox.sandbox import GANGKEEPER_NAMESPACE

pytestmark = pytest.mark.e2e

GROUP, VERSION, PLURAL = "autoscaling.x-k8s.io", "v1", "provisioningrequests"
CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
POOLS = ("pr-a", "pr-b", "pr-c", "pr-d", "pr-e")
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def asking(cluster: Cluster) -> Iterator[Cluster]:
    """The CRD installed, gangkeeper restarted asking through ProvisioningRequests."""
    try:
        crd = find_provisioning_request_crd()
    except BinariesMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    cluster.kubectl("apply", "--server-side", "-f", str(crd))
    cluster.kubectl("wait", "--for=condition=Established",
                    f"crd/{PLURAL}.{GROUP}", "--timeout=60s")
    # The sandbox runs gangkeeper with its install's RBAC: this mode's rules, as
    # `gangkeeper manifests --autoscaling provisioningrequest` renders them.
    cluster.kubectl("apply", "--server-side", "-f", "-", input=cluster_role(True))
    pools = [{"name": p, "maxCount": 4, "labels": {POOL_LABEL: p},
              "allocatable": {"nvidia.com/gpu": 8}} for p in POOLS]
    with cluster.gangkeeper_configured(
        autoscaling="provisioningrequest", pools=pools, provisioningRetrySeconds=1,
        provisioningRequest={"retryLimit": 1},
    ):
        try:
            yield cluster
        finally:
            cluster.kubectl("apply", "--server-side", "-f", "-", input=cluster_role(False))


def cluster_role(provisioning_requests: bool) -> str:
    [role] = [o for o in render_manifests(GANGKEEPER_NAMESPACE,
                                          provisioning_requests=provisioning_requests)
              if o["kind"] == "ClusterRole"]
    return yaml.safe_dump(role)


@pytest.fixture
def namespace(asking: Cluster) -> Iterator[str]:
    name = asking.new_namespace(opted_in=True)
    yield name
    asking.delete_namespace(name)


def requests(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    found = cluster.custom.list_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, label_selector=PROVISIONING_LABEL)
    return {r["metadata"]["name"]: r for r in found["items"]}


def members(cluster: Cluster, namespace: str, job: str) -> list[Any]:
    return cluster.core.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items


def gated(pod: Any) -> bool:
    return GATE in [g.name for g in pod.spec.scheduling_gates or []]


def reasons(cluster: Cluster, namespace: str) -> dict[str, str]:
    """Event reason → note, of gangkeeper's Events in the namespace."""
    return {e.get("reason", ""): e.get("note") or "" for e in events_in(cluster.api_client,
                                                                        namespace)}


def set_conditions(cluster: Cluster, namespace: str, name: str, *kinds: str) -> None:
    """Write what cluster-autoscaler would: `kinds` True, now (the status subresource)."""
    now = time.time()
    body = {"status": {"conditions": [condition(k, at=now, message=f"{k} (written by the test)")
                                      for k in kinds]}}
    cluster.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, body,
        _content_type="application/merge-patch+json")


def start_gang(cluster: Cluster, namespace: str, pool: str, name: str = "train") -> str:
    """A 2 x 8-GPU Indexed Job on `pool` (no node); the name of its first request, once
    gangkeeper made it."""
    cluster.batch.create_namespaced_job(namespace, indexed_job(name, namespace, pool,
                                                               workers=2, gpus=8))
    found = cluster.wait_for(lambda: requests(cluster, namespace), timeout=TIMEOUT,
                             message="gangkeeper's ProvisioningRequest")
    [request] = found
    return request


def test_a_gang_gets_a_request_and_pod_template_owned_by_its_job_and_is_released_whole_when_provisioned(  # noqa: E501
    asking: Cluster, namespace: str
) -> None:
    name = start_gang(asking, namespace, "pr-a")
    request = requests(asking, namespace)[name]
    assert name.endswith("-gkpr-1")
    assert request["spec"]["provisioningClassName"] == CLASS
    [pod_set] = request["spec"]["podSets"]
    assert pod_set["count"] == 2
    template = asking.core.read_namespaced_pod_template(pod_set["podTemplateRef"]["name"],
                                                        namespace)
    assert template.metadata.labels[PROVISIONING_REQUEST_LABEL] == name
    assert template.template.spec.node_selector == {POOL_LABEL: "pr-a"}
    assert template.template.spec.containers[0].resources.requests["nvidia.com/gpu"] == "8"
    job = asking.batch.read_namespaced_job("train", namespace)
    template_owners = asking.api_client.sanitize_for_serialization(
        template.metadata.owner_references)
    for [owner] in (request["metadata"]["ownerReferences"], template_owners):
        assert (owner["uid"], owner["controller"]) == (job.metadata.uid, False)
    assert all(gated(p) for p in members(asking, namespace, "train"))

    # cluster-autoscaler's part: the capacity is there (nodes not seen by gangkeeper yet).
    set_conditions(asking, namespace, name, "Accepted", "Provisioned")
    started = time.monotonic()
    def released() -> list[Any]:
        found = members(asking, namespace, "train")
        return found if len(found) == 2 and not any(gated(p) for p in found) else []

    pods = asking.wait_for(released, timeout=TIMEOUT, message="the gang released")
    print(f"Provisioned=True -> gang released: {time.monotonic() - started:.2f}s")
    for pod in pods:
        assert pod.metadata.annotations[CONSUME_PROVISIONING_REQUEST_ANNOTATION] == name
        assert pod.metadata.annotations[PROVISIONING_CLASS_ANNOTATION] == CLASS
    # Released unpinned onto the booked capacity; the nodes come and the gang binds whole.
    nodes = asking.create_gpu_nodes(f"{namespace}-pr-a", 2, 8, labels={POOL_LABEL: "pr-a"})
    try:
        asking.wait_for(lambda: all(p.spec.node_name for p in members(
            asking, namespace, "train")), timeout=TIMEOUT, message="both members bound")
        assert {p.spec.node_name for p in members(asking, namespace, "train")} == set(nodes)
        # The booking is the members': the request stays while they live.
        assert name in requests(asking, namespace)
        assert "GangReleasedUnpinned" in reasons(asking, namespace)
    finally:
        for node in nodes:
            with contextlib.suppress(ApiException):
                asking.core.delete_node(node)


def test_failed_is_retried_with_a_new_attempt_then_given_up_with_an_event(
    asking: Cluster, namespace: str
) -> None:
    first = start_gang(asking, namespace, "pr-b")
    set_conditions(asking, namespace, first, "Failed")
    second = first.replace("-gkpr-1", "-gkpr-2")
    asking.wait_for(lambda: list(requests(asking, namespace)) == [second], timeout=TIMEOUT,
                    message="attempt 2 replacing attempt 1")
    asking.wait_for(lambda: "GangProvisioningFailed" in reasons(asking, namespace),
                    timeout=TIMEOUT, message="the retry's Event")
    assert "asking again with attempt 2" in reasons(asking, namespace)["GangProvisioningFailed"]
    set_conditions(asking, namespace, second, "Failed")
    asking.wait_for(lambda: "GangProvisioningGaveUp" in reasons(asking, namespace),
                    timeout=TIMEOUT, message="the give-up Event")
    assert "2 of 2 attempts failed" in reasons(asking, namespace)["GangProvisioningGaveUp"]
    # Decided in the pass that posted the Event: no third attempt; the last stays.
    assert list(requests(asking, namespace)) == [second]
    assert all(gated(p) for p in members(asking, namespace, "train"))


def test_booking_expired_before_release_asks_again(asking: Cluster, namespace: str) -> None:
    first = start_gang(asking, namespace, "pr-c")
    # Provisioned, then the booking expired before gangkeeper could release: Kueue's
    # order reads BookingExpired first, so the gang asks again and is not released.
    set_conditions(asking, namespace, first, "Provisioned", "BookingExpired")
    second = first.replace("-gkpr-1", "-gkpr-2")
    asking.wait_for(lambda: list(requests(asking, namespace)) == [second], timeout=TIMEOUT,
                    message="attempt 2 after the booking expired")
    assert all(gated(p) for p in members(asking, namespace, "train"))


def test_capacity_revoked_gives_up_with_an_event(asking: Cluster, namespace: str) -> None:
    name = start_gang(asking, namespace, "pr-d")
    set_conditions(asking, namespace, name, "CapacityRevoked")
    asking.wait_for(lambda: "GangProvisioningRevoked" in reasons(asking, namespace),
                    timeout=TIMEOUT, message="the revoked Event")
    assert list(requests(asking, namespace)) == [name]
    assert all(gated(p) for p in members(asking, namespace, "train"))


def test_a_restarted_gangkeeper_adopts_the_request_and_deletes_it_with_the_gang(
    asking: Cluster, namespace: str
) -> None:
    name = start_gang(asking, namespace, "pr-e")
    uid = requests(asking, namespace)[name]["metadata"]["uid"]
    sandbox = asking.gangkeeper_restart()
    url = sandbox.controller_url
    asking.wait_for(lambda: metrics(asking, url).get("gangkeeper_controller_leader") == 1,
                    timeout=TIMEOUT, message="the restarted controller leading")
    passes = metrics(asking, url).get("gangkeeper_controller_plan_seconds_count", 0)
    # A pass as leader (the next one; passes also run every resync) ...
    asking.wait_for(
        lambda: metrics(asking, url).get("gangkeeper_controller_plan_seconds_count", 0) > passes,
        timeout=TIMEOUT, message="a pass of the restarted leader")
    seen = metrics(asking, url)
    # ... counts the gang as waiting for capacity, on the request its predecessor made,
    # which it adopted rather than made again.
    assert seen.get(WAITING_FOR_NODES, 0) >= 1, seen
    assert seen.get("gangkeeper_provisioning_requests_created_total", 0) == 0, seen
    assert requests(asking, namespace)[name]["metadata"]["uid"] == uid
    [report] = status(asking, namespace)
    assert report["code"] == "provisioning" and name in report["reason"], report
    # The gang goes (its Job deleted, pods with it): its request and template go too.
    asking.batch.delete_namespaced_job("train", namespace, propagation_policy="Foreground")
    asking.wait_for(lambda: not requests(asking, namespace), timeout=TIMEOUT,
                    message="the request deleted with its gang")
    asking.wait_for(lambda: not asking.core.list_namespaced_pod_template(
        namespace, label_selector=PROVISIONING_LABEL).items, timeout=TIMEOUT,
        message="its PodTemplate deleted")


WAITING_FOR_NODES = 'gangkeeper_pending_gangs{reason="provisioning"}'


def status(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    """`gangkeeper status -o json` for the namespace, with the sandbox's config."""
    assert cluster.sandbox is not None
    argv = cluster.sandbox.state()["gangkeeper_argv"]
    config = str(argv[argv.index("--config") + 1])
    done = subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "status", "--kubeconfig",
         cluster.kubeconfig, "--config", config, "-n", namespace, "-o", "json"],
        capture_output=True, text=True, check=True, timeout=60)
    reports: list[dict[str, Any]] = json.loads(done.stdout)
    return reports
