"""The ValidatingAdmissionPolicy `gangkeeper-pod-updates` on a real API server.

`kubectl apply -k deploy/` installs it; then, as gangkeeper's ServiceAccount
(impersonated, so RBAC and the policy's match condition see exactly that user), the
controller's own patch of a gated pod passes (gate removal as `gate_removal_patch`
writes it, the hostname pin, gangkeeper.io/ keys, the release onto a provisioned
ProvisioningRequest with its two cluster-autoscaler annotations), and every broader
patch is refused
by the API server with the policy's message. The same broad patches by the cluster
admin pass: the policy binds only gangkeeper. Nothing here mocks the API server.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from deploy_support import REPO, ControlPlane
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.names import (
    CONSUME_PROVISIONING_REQUEST_ANNOTATION,
    GATE,
    POD_UPDATE_POLICY,
    PROVISIONING_CLASS_ANNOTATION,
)
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.controller.fencing import guarded
from gangkeeper.webhook.controller.writes import gate_removal_patch, ungate_patch

pytestmark = pytest.mark.e2e

NAMESPACE = "gangkeeper-system"
SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:gangkeeper"
OTHER_GATE = "example.com/quota"


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> ControlPlane:
    control_plane.kubectl("apply", "--server-side", "-k", str(REPO / "deploy"))
    control_plane.namespace("vap-team", {})
    _policy_in_effect(control_plane)
    return control_plane


def _policy_in_effect(cluster: ControlPlane, timeout: float = 60.0) -> None:
    """Wait until the API server enforces the policy just applied: its policy informer
    loads it a moment later, and a refusal test run first saw its patch allowed."""
    core = client.CoreV1Api(cluster.api_client)
    core.create_namespaced_pod("vap-team", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vap-probe", "labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}})
    deadline = time.monotonic() + timeout
    try:
        for attempt in itertools.count():
            label = {"op": "add", "path": f"/metadata/labels/probe-{attempt}", "value": "x"}
            try:
                _as_gangkeeper(cluster, "vap-probe", [label])
            except ApiException as exc:
                if POD_UPDATE_POLICY in str(exc.body):
                    return
                raise
            assert time.monotonic() < deadline, "the pod-updates policy never took effect"
            time.sleep(0.2)
    finally:
        core.delete_namespaced_pod("vap-probe", "vap-team", grace_period_seconds=0)


@pytest.fixture
def pod(cluster: ControlPlane) -> Iterator[str]:
    """A gated training pod as the webhook leaves it (gangkeeper's gate and another)."""
    name = f"trainer-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(cluster.api_client)
    core.create_namespaced_pod("vap-team", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"team": "nlp", "gangkeeper.io/gang": "g"},
                     "annotations": {"owner": "alice", "gangkeeper.io/min-member": "2"}},
        "spec": {
            "schedulingGates": [{"name": OTHER_GATE}, {"name": GATE}],
            "containers": [{"name": "c", "image": "busybox:1.36"}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        },
    })
    yield name
    core.delete_namespaced_pod(name, "vap-team", grace_period_seconds=0)


def _gates(cluster: ControlPlane, name: str) -> list[str]:
    found = client.CoreV1Api(cluster.api_client).read_namespaced_pod(name, "vap-team")
    return [g.name for g in found.spec.scheduling_gates or []]


def _patch(api: Any, name: str, ops: list[dict[str, Any]]) -> None:
    # A list body is sent as application/json-patch+json, as the controller sends it.
    client.CoreV1Api(api).patch_namespaced_pod(name, "vap-team", ops)


def _as_gangkeeper(cluster: ControlPlane, name: str, ops: list[dict[str, Any]]) -> None:
    api = cluster.client_as(SERVICE_ACCOUNT)
    try:
        _patch(api, name, ops)
    finally:
        api.close()


def _pin(node: str) -> dict[str, Any]:
    return {"op": "add", "path": "/spec/nodeSelector", "value": {"kubernetes.io/hostname": node}}


def test_the_controllers_own_patch_passes(cluster: ControlPlane, pod: str) -> None:
    ops = gate_removal_patch([OTHER_GATE, GATE])
    ops += [_pin("gpu-node-3"),
            {"op": "add", "path": "/metadata/labels/gangkeeper.io~1released", "value": "true"},
            {"op": "replace", "path": "/metadata/annotations/gangkeeper.io~1min-member",
             "value": "3"}]
    _as_gangkeeper(cluster, pod, ops)
    assert _gates(cluster, pod) == [OTHER_GATE]


def test_the_release_onto_a_provisioned_request_passes(cluster: ControlPlane, pod: str) -> None:
    raw = client.CoreV1Api(cluster.api_client).read_namespaced_pod(pod, "vap-team")
    member = pod_info(client.ApiClient().sanitize_for_serialization(raw), Config())
    keys = {CONSUME_PROVISIONING_REQUEST_ANNOTATION: "g-gkpr-1",
            PROVISIONING_CLASS_ANNOTATION: "best-effort-atomic-scale-up.autoscaling.x-k8s.io"}
    _as_gangkeeper(cluster, pod, guarded(ungate_patch(member, None, None, keys),
                                         member.resource_version))
    found = client.CoreV1Api(cluster.api_client).read_namespaced_pod(pod, "vap-team")
    assert _gates(cluster, pod) == [OTHER_GATE]
    assert {k: found.metadata.annotations[k] for k in keys} == keys


BROADER = [
    pytest.param([{"op": "add", "path": "/metadata/annotations/privileged", "value": "yes"}],
                 "annotations under gangkeeper.io/", id="a new user annotation"),
    pytest.param([{"op": "replace", "path": "/metadata/annotations/owner", "value": "bob"}],
                 "annotations under gangkeeper.io/", id="a user annotation changed"),
    pytest.param([{"op": "add", "path": "/metadata/annotations/autoscaling.x-k8s.io~1other",
                   "value": "x"}],
                 "annotations under gangkeeper.io/", id="a third autoscaling.x-k8s.io annotation"),
    pytest.param([{"op": "replace", "path": "/spec/containers/0/image", "value": "evil:1"}],
                 "container image", id="a container image"),
    pytest.param([{"op": "replace", "path": "/metadata/labels/team", "value": "other"}],
                 "labels under gangkeeper.io/", id="a user label"),
    pytest.param([{"op": "add", "path": "/metadata/labels/privileged", "value": "yes"}],
                 "labels under gangkeeper.io/", id="a new user label"),
    pytest.param([{"op": "remove", "path": "/metadata/annotations/owner"}],
                 "annotations under gangkeeper.io/", id="a user annotation removed"),
    pytest.param([{"op": "replace", "path": "/spec/schedulingGates",
                   "value": [{"name": GATE}]}], "its own scheduling gate", id="another gate"),
    pytest.param([{"op": "add", "path": "/spec/nodeSelector",
                   "value": {"kubernetes.io/hostname": "n1", "pool": "spot"}}],
                 "kubernetes.io/hostname node selector", id="a node selector other than the pin"),
    pytest.param([{"op": "add", "path": "/spec/tolerations/-",
                   "value": {"key": "node-role.kubernetes.io/control-plane",
                             "operator": "Exists"}}],
                 "spec.tolerations", id="a toleration"),
    pytest.param([{"op": "add", "path": "/spec/activeDeadlineSeconds", "value": 1}],
                 "spec.activeDeadlineSeconds", id="activeDeadlineSeconds"),
    pytest.param([{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/hold"]}],
                 "metadata.finalizers", id="a finalizer"),
]


@pytest.mark.parametrize(("ops", "needle"), BROADER)
def test_a_broader_patch_by_gangkeeper_is_refused(
    cluster: ControlPlane, pod: str, ops: list[dict[str, Any]], needle: str
) -> None:
    with pytest.raises(ApiException) as caught:
        _as_gangkeeper(cluster, pod, ops)
    assert caught.value.status in (403, 422), caught.value.body
    message = json.loads(caught.value.body)["message"]
    assert "gangkeeper-pod-updates" in message and needle in message, message


@pytest.mark.parametrize(("ops", "needle"), BROADER)
def test_the_same_patch_by_the_admin_passes(
    cluster: ControlPlane, pod: str, ops: list[dict[str, Any]], needle: str
) -> None:
    _patch(cluster.api_client, pod, ops)
