"""The NetworkPolicy and the pod-update ValidatingAdmissionPolicy as rendered.

What the API server cannot check for us: the NetworkPolicy opens exactly the port the
Service targets and selects the pods of both Deployments (webhook and controller); the
policy binds to the ServiceAccount of the namespace it is rendered for, which both run
as, with Deny. Its CEL is compiled and
enforced by the real API server in tests/deploy/test_pod_update_policy.py.
"""

from __future__ import annotations

from typing import Any

from gangkeeper.policies.names import APP_NAME, POD_UPDATE_POLICY
from gangkeeper.webhook.install import render_manifests


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def test_the_network_policy_admits_only_the_https_port_of_gangkeepers_pods() -> None:
    objects = render_manifests()
    policy, service = one(objects, "NetworkPolicy"), one(objects, "Service")
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    assert len(deployments) == 2, "the webhook's and the controller's"
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["https"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    for deployment in deployments:  # both processes serve only the one HTTPS port
        template = deployment["spec"]["template"]
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= (
            template["metadata"]["labels"].items())
        (container,) = template["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert policy["spec"]["ingress"] == [
            {"ports": [{"protocol": "TCP", "port": ports["https"]}]}]


def test_the_pod_update_policy_binds_to_the_service_account_of_its_namespace() -> None:
    objects = render_manifests(namespace="ml-admission")
    policy = one(objects, "ValidatingAdmissionPolicy")
    binding = one(objects, "ValidatingAdmissionPolicyBinding")
    assert policy["metadata"]["name"] == binding["spec"]["policyName"] == POD_UPDATE_POLICY
    assert binding["spec"]["validationActions"] == ["Deny"]
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["expression"] == (
        f"request.userInfo.username == 'system:serviceaccount:ml-admission:{APP_NAME}'")
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert (rule["resources"], rule["operations"]) == (["pods"], ["UPDATE"])
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert all(v["message"].startswith("gangkeeper may") for v in policy["spec"]["validations"])
    # The controller, which patches pods, runs as that ServiceAccount, as the webhook does.
    for deployment in (o for o in objects if o["kind"] == "Deployment"):
        assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == APP_NAME


def test_both_certificate_modes_ship_both_guards() -> None:
    for mode in ("self", "cert-manager"):
        kinds = {o["kind"] for o in render_manifests(cert_mode=mode)}  # type: ignore[arg-type]
        assert {"NetworkPolicy", "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding"} <= kinds
