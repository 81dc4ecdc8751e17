"""`kubectl apply -k deploy/` against a real API server, and what the installation allows.

- every object is accepted (the API server compiles the CEL match conditions and
  validates the webhook configurations, RBAC, Deployment, PDB);
- the gangkeeper pod is admitted by Pod Security `restricted` in its namespace, and a
  slightly weaker pod is not (so the check is really enforced);
- with nothing but gangkeeper's own ServiceAccount permissions, `SelfManagedCerts`
  fills the shipped Secret, injects the caBundle, re-injects it after removal, and a
  second replica converges on the same CA;
- the ServiceAccount can do what the controller and webhook need and no more.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from deploy_support import REPO, ControlPlane, run_kubectl
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gangkeeper.certs import ClientCalls, SelfManagedCerts
from gangkeeper.webhook.install import render_manifests

pytestmark = pytest.mark.e2e

NAMESPACE = "gangkeeper-system"
SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:gangkeeper"
PLURALS = {
    "Namespace": "namespace",
    "ServiceAccount": "serviceaccount",
    "ClusterRole": "clusterrole",
    "ClusterRoleBinding": "clusterrolebinding",
    "Role": "role",
    "RoleBinding": "rolebinding",
    "PriorityClass": "priorityclass",
    "ConfigMap": "configmap",
    "Secret": "secret",
    "Service": "service",
    "Deployment": "deployment",
    "PodDisruptionBudget": "poddisruptionbudget",
    "MutatingWebhookConfiguration": "mutatingwebhookconfiguration",
    "ValidatingWebhookConfiguration": "validatingwebhookconfiguration",
    "ValidatingAdmissionPolicy": "validatingadmissionpolicy",
    "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybinding",
    "NetworkPolicy": "networkpolicy",
}


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane) -> ControlPlane:
    control_plane.kubectl("apply", "--server-side", "-k", str(REPO / "deploy"))
    return control_plane


@pytest.mark.parametrize(
    "obj", render_manifests(), ids=lambda o: f"{o['kind']}/{o['metadata']['name']}"
)
def test_kubectl_apply_k_deploy_creates_every_object(
    installed: ControlPlane, obj: dict[str, Any]
) -> None:
    args = ["get", PLURALS[obj["kind"]], obj["metadata"]["name"], "-o", "name"]
    if "namespace" in obj["metadata"]:
        args += ["-n", obj["metadata"]["namespace"]]
    assert installed.kubectl(*args).stdout.strip()


def test_the_stored_webhooks_keep_their_match_conditions(installed: ControlPlane) -> None:
    stored = ClientCalls(installed.api_client).read_webhook_configuration(
        "mutating", "gangkeeper-mutating"
    )
    assert stored is not None
    (hook,) = stored["webhooks"]
    names = [c["name"] for c in hook["matchConditions"]]
    assert names == ["create-only", "gpu-or-training-pod"]


def _gangkeeper_pod(name: str = "gangkeeper") -> dict[str, Any]:
    (deployment,) = [
        o for o in render_manifests() if o["kind"] == "Deployment" and o["metadata"]["name"] == name
    ]
    template = copy.deepcopy(deployment["spec"]["template"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "psa-probe", **template["metadata"]},
        "spec": template["spec"],
    }


@pytest.mark.parametrize("name", ["gangkeeper", "gangkeeper-controller"])
def test_the_gangkeeper_pod_is_admitted_under_pod_security_restricted(
    installed: ControlPlane, name: str
) -> None:
    core = client.CoreV1Api(installed.api_client)
    labels = core.read_namespace(NAMESPACE).metadata.labels
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    core.create_namespaced_pod(NAMESPACE, _gangkeeper_pod(name), dry_run="All")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("allowPrivilegeEscalation", True),
        ("capabilities", {"drop": ["ALL"], "add": ["NET_ADMIN"]}),
        ("runAsUser", 0),
    ],
)
def test_a_weaker_pod_is_refused_there_so_the_check_is_real(
    installed: ControlPlane, field: str, value: Any
) -> None:
    pod = _gangkeeper_pod()
    pod["spec"]["containers"][0]["securityContext"][field] = value
    core = client.CoreV1Api(installed.api_client)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(NAMESPACE, pod, dry_run="All")
    assert caught.value.status == 403
    assert "restricted" in str(caught.value.body)


def _bundles(api: Any) -> list[str | None]:
    """caBundle of every webhook entry, from the JSON the API server sends."""
    calls = ClientCalls(api)
    found: list[str | None] = []
    for kind, name in (
        ("mutating", "gangkeeper-mutating"),
        ("validating", "gangkeeper-validating"),
    ):
        config = calls.read_webhook_configuration(kind, name)
        assert config is not None, name
        found += [h["clientConfig"].get("caBundle") for h in config["webhooks"]]
    return found


def _secret_data(cp: ControlPlane) -> dict[str, str]:
    secret = ClientCalls(cp.api_client).read_secret(NAMESPACE, "gangkeeper-tls")
    assert secret is not None
    data: dict[str, str] = secret.get("data") or {}
    return data


def test_self_managed_certs_work_with_only_gangkeepers_permissions(
    installed: ControlPlane, tmp_path: Path
) -> None:
    as_gangkeeper = installed.client_as(SERVICE_ACCOUNT)
    try:
        replica = SelfManagedCerts(as_gangkeeper, namespace=NAMESPACE, cert_dir=tmp_path / "r1")
        replica.reconcile()

        ca_pem = (tmp_path / "r1" / "ca.crt").read_bytes()
        expected = base64.b64encode(ca_pem).decode()
        assert _bundles(installed.api_client) == [expected] * 3
        cert = x509.load_pem_x509_certificate((tmp_path / "r1" / "tls.crt").read_bytes())
        cert.verify_directly_issued_by(x509.load_pem_x509_certificates(ca_pem)[0])
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert f"gangkeeper.{NAMESPACE}.svc" in san.get_values_for_type(x509.DNSName)

        # Someone re-applies or edits the configuration and the caBundle is gone.
        installed.kubectl(
            "patch",
            "validatingwebhookconfiguration",
            "gangkeeper-validating",
            "--type=json",
            '-p=[{"op": "remove", "path": "/webhooks/1/clientConfig/caBundle"}]',
        )
        assert None in _bundles(installed.api_client)
        replica.reconcile()
        assert _bundles(installed.api_client) == [expected] * 3

        # A second replica adopts the Secret instead of issuing its own CA.
        SelfManagedCerts(as_gangkeeper, namespace=NAMESPACE, cert_dir=tmp_path / "r2").reconcile()
        assert (tmp_path / "r2" / "ca.crt").read_bytes() == ca_pem
        assert (tmp_path / "r2" / "tls.crt").read_bytes() == (
            tmp_path / "r1" / "tls.crt"
        ).read_bytes()
    finally:
        as_gangkeeper.close()


@pytest.mark.parametrize(
    ("verb", "resource", "namespace", "allowed"),
    [
        # controller
        ("patch", "pods", "team-a", True),
        ("update", "pods", "team-a", False),
        # placeholder pods (autoscaling: placeholders, the default); the watchdog
        # deletes a released member whose pinned node was taken.
        ("create", "pods", "team-a", True),
        ("delete", "pods", "team-a", True),
        ("update", "pods/status", "team-a", False),
        ("create", "priorityclasses.scheduling.k8s.io", "", False),
        ("create", "events.events.k8s.io", "team-a", True),
        ("create", "podgroups.scheduling.x-k8s.io", "team-a", True),
        ("delete", "podgroups.scheduling.x-k8s.io", "team-a", False),
        ("create", "leases.coordination.k8s.io", NAMESPACE, True),
        ("update", "leases.coordination.k8s.io/gangkeeper-controller", NAMESPACE, True),
        ("update", "leases.coordination.k8s.io/someone-elses", NAMESPACE, False),
        ("create", "leases.coordination.k8s.io", "team-a", False),
        # webhook
        ("watch", "nodes", "", True),
        ("patch", "nodes", "", False),
        ("list", "jobs.batch", "team-a", True),
        ("create", "jobs.batch", "team-a", False),
        ("watch", "pytorchjobs.kubeflow.org", "team-a", True),
        # certificates
        ("update", "secrets/gangkeeper-tls", NAMESPACE, True),
        ("get", "secrets/some-other-secret", NAMESPACE, False),
        ("list", "secrets", NAMESPACE, False),
        ("get", "secrets/gangkeeper-tls", "team-a", False),
        ("patch", "mutatingwebhookconfigurations/gangkeeper-mutating", "", True),
        ("patch", "mutatingwebhookconfigurations/someone-elses", "", False),
        ("delete", "validatingwebhookconfigurations/gangkeeper-validating", "", False),
        # no Secret outside its namespace, and in it only its own, never list/watch/create
        ("get", "secrets", "kube-system", False),
        ("get", "secrets/gangkeeper-tls", "kube-system", False),
        ("list", "secrets", "*", False),
        ("watch", "secrets", "*", False),
        ("watch", "secrets", NAMESPACE, False),
        ("get", "secrets", "team-a", False),
        ("create", "secrets", NAMESPACE, False),
        ("delete", "secrets/gangkeeper-tls", NAMESPACE, False),
        ("update", "secrets/gangkeeper-tls", "team-a", False),
        # pods: only the main resource (the pod-update policy bounds the fields);
        # `resource:subresource`
        ("patch", "pods:status", "team-a", False),
        # evictions: preemption's victims of no gang, so PodDisruptionBudgets hold
        ("create", "pods:eviction", "team-a", True),
        ("list", "poddisruptionbudgets.policy", "team-a", True),
        ("create", "poddisruptionbudgets.policy", "team-a", False),
        ("create", "pods:binding", "team-a", False),
        ("patch", "pods:ephemeralcontainers", "team-a", False),
        ("patch", "pods:resize", "team-a", False),
        ("get", "pods:exec", "team-a", False),
        # it cannot loosen its own bounds
        ("update", "validatingadmissionpolicies/gangkeeper-pod-updates", "", False),
        ("delete", "validatingadmissionpolicybindings/gangkeeper-pod-updates", "", False),
        ("patch", "networkpolicies/gangkeeper", NAMESPACE, False),
        ("update", "roles/gangkeeper", NAMESPACE, False),
        ("escalate", "clusterroles", "", False),
        ("impersonate", "serviceaccounts", NAMESPACE, False),
        ("create", "serviceaccounts/token", NAMESPACE, False),
        ("get", "configmaps", "kube-system", False),
    ],
)
def test_the_service_account_can_do_what_gangkeeper_needs_and_no_more(
    installed: ControlPlane, verb: str, resource: str, namespace: str, allowed: bool
) -> None:
    resource, _, subresource = resource.partition(":")  # `pods/x` would name pod x
    args = ["auth", "can-i", verb, resource, f"--as={SERVICE_ACCOUNT}"]
    args += [f"--subresource={subresource}"] if subresource else []
    if namespace == "*":
        args.append("--all-namespaces")
    elif namespace:
        args += ["-n", namespace]
    done = run_kubectl(installed.kubectl_bin, *args, kubeconfig=installed.kubeconfig)
    assert done.stdout.strip() == ("yes" if allowed else "no"), done.stderr
