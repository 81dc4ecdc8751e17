"""The ValidatingAdmissionPolicy `gangkeeper-pod-updates` on a real API server.

`kubectl apply -k deploy/` installs it; then, as gangkeeper's ServiceAccount
(impersonated, so RBAC and the policy's match condition see exactly that user), the
controller's own patch of a gated pod passes (gate removal and the matchFields pin as
`ungate_patch` writes them, into every term of a user's required node affinity too;
the hostname pin of earlier versions; gangkeeper.io/ keys; the release onto a
provisioned ProvisioningRequest with its two cluster-autoscaler annotations), and
every broader patch is refused
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

from gangkeeper.policies.assigner.pin import Pin, pin_of, pinned
from gangkeeper.policies.cluster.observed_gangs import PodInfo, pod_info
from gangkeeper.policies.names import (
    CONSUME_PROVISIONING_REQUEST_ANNOTATION,
    GATE,
    PIN_LABEL,
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


def _member(cluster: ControlPlane, name: str) -> PodInfo:
    raw = client.CoreV1Api(cluster.api_client).read_namespaced_pod(name, "vap-team")
    return pod_info(client.ApiClient().sanitize_for_serialization(raw), Config())


def _own_keys() -> list[dict[str, Any]]:
    return [{"op": "add", "path": "/metadata/labels/gangkeeper.io~1released", "value": "true"},
            {"op": "replace", "path": "/metadata/annotations/gangkeeper.io~1min-member",
             "value": "3"}]


def _lift_and_pin(cluster: ControlPlane, name: str, node: str) -> PodInfo:
    """The controller's own release patch (`writes.ungate_patch`, fenced as it sends it)
    with gangkeeper.io/ keys changed beside it; the pod as it was before."""
    member = _member(cluster, name)
    ops = ungate_patch(member, node, time.time())
    _as_gangkeeper(cluster, name, guarded([*ops[:-1], *_own_keys(), ops[-1]],
                                          member.resource_version))
    return member


def test_the_controllers_own_patch_passes(cluster: ControlPlane, pod: str) -> None:
    _lift_and_pin(cluster, pod, "gpu-node-3")
    assert _gates(cluster, pod) == [OTHER_GATE]
    assert pin_of(_member(cluster, pod).placement) == Pin(node="gpu-node-3")


def test_the_pin_added_to_every_term_of_a_users_affinity_passes(cluster: ControlPlane) -> None:
    core = client.CoreV1Api(cluster.api_client)
    by_pool = {"key": "pool", "operator": "In", "values": ["a"]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [by_pool]},
                {"matchFields": [{"key": "metadata.name", "operator": "NotIn",
                                  "values": ["gpu-node-9"]}]},
            ]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [by_pool]}}],
        },
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]},
    }
    name = f"trainer-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_pod("vap-team", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"gangkeeper.io/gang": "g"},
                     "annotations": {"gangkeeper.io/min-member": "2"}},
        "spec": {"schedulingGates": [{"name": GATE}], "affinity": affinity,
                 "containers": [{"name": "c", "image": "busybox:1.36"}]},
    })
    try:
        before = _lift_and_pin(cluster, name, "gpu-node-3")
        after = _member(cluster, name)
        assert pin_of(after.placement) == Pin(node="gpu-node-3")
        assert after.placement == pinned(before.placement, "gpu-node-3")
    finally:
        core.delete_namespaced_pod(name, "vap-team", grace_period_seconds=0)


def test_an_earlier_versions_hostname_pin_still_passes(cluster: ControlPlane, pod: str) -> None:
    # During a rolling update the old leader pins the way it always did.
    pin = {"op": "add", "path": "/spec/nodeSelector", "value": {PIN_LABEL: "gpu-node-3"}}
    _as_gangkeeper(cluster, pod, [*gate_removal_patch([OTHER_GATE, GATE]), pin])
    assert _gates(cluster, pod) == [OTHER_GATE]


def test_the_release_onto_a_provisioned_request_passes(cluster: ControlPlane, pod: str) -> None:
    member = _member(cluster, pod)
    keys = {CONSUME_PROVISIONING_REQUEST_ANNOTATION: "g-gkpr-1",
            PROVISIONING_CLASS_ANNOTATION: "best-effort-atomic-scale-up.autoscaling.x-k8s.io"}
    _as_gangkeeper(cluster, pod, guarded(ungate_patch(member, None, None, keys),
                                         member.resource_version))
    found = client.CoreV1Api(cluster.api_client).read_namespaced_pod(pod, "vap-team")
    assert _gates(cluster, pod) == [OTHER_GATE]
    assert {k: found.metadata.annotations[k] for k in keys} == keys


_PIN_FIELD = {"key": "metadata.name", "operator": "In", "values": ["n1"]}


def _required(terms: list[dict[str, Any]]) -> dict[str, Any]:
    """Required node affinity set on a pod that had none (the API server allows it
    while the pod is gated)."""
    return {"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}


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
    pytest.param([_required([{"matchExpressions": [
                     {"key": "pool", "operator": "In", "values": ["spot"]}]}])],
                 "to spec.affinity", id="a required node affinity term other than the pin"),
    pytest.param([_required([{"matchFields": [
                     {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}])],
                 "to spec.affinity", id="a node field other than the pin"),
    pytest.param([_required([{"matchFields": [_PIN_FIELD]}, {"matchFields": [_PIN_FIELD]}])],
                 "to spec.affinity", id="two terms where the pin makes one"),
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
