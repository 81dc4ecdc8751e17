"""`gangkeeper serve` started with the Deployment's own arguments, against a real API server.

The container's args and env are taken from the rendered Deployment (only the cert
directory, listen address and a kubeconfig are swapped in, since no kubelet runs here),
so a flag the server does not know, a wrong Secret name or a broken self-managed
certificate path fails this test. The server must become ready with a certificate for
the Service names signed by the CA in the Secret, and that CA must be the caBundle of
every webhook entry.
"""

from __future__ import annotations

import base64
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from deploy_support import REPO, ControlPlane

from gangkeeper.certs import ClientCalls
from gangkeeper.certs.incluster import WebhookKind
from gangkeeper.policies.names import SECRET_NAME
from gangkeeper.webhook.install import CERT_DIR, render_manifests
from gangkeeper.webhook.sandbox.processes import free_port

pytestmark = pytest.mark.e2e

NAMESPACE = "gangkeeper-system"
SERVICE_HOST = f"gangkeeper.{NAMESPACE}.svc"


def deployment_container() -> dict[str, Any]:
    # The webhook's Deployment (its args carry --no-controller: admission only).
    (deployment,) = [
        o for o in render_manifests()
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "gangkeeper"
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--no-controller" in container["args"]
    container_dict: dict[str, Any] = container
    return container_dict


def swap(args: list[str], flag: str, value: str) -> list[str]:
    i = args.index(flag)
    return [*args[: i + 1], value, *args[i + 2 :]]


@pytest.fixture(scope="module")
def served(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    control_plane.kubectl("apply", "--server-side", "-k", str(REPO / "deploy"))
    workdir = tmp_path_factory.mktemp("serve")
    container = deployment_container()
    args: list[str] = list(container["args"])
    assert CERT_DIR in args
    port = free_port()
    args = swap(args, "--cert-dir", str(workdir / "certs"))
    args = swap(args, "--host", "127.0.0.1")
    args = swap(args, "--port", str(port))
    # The ConfigMap would be mounted at --config; write its content to the same name here.
    (config,) = [o for o in render_manifests() if o["kind"] == "ConfigMap"]
    (workdir / "config.yaml").write_text(config["data"]["config.yaml"])
    args = swap(args, "--config", str(workdir / "config.yaml"))
    env = {**os.environ, "POD_NAMESPACE": NAMESPACE, "POD_NAME": "gangkeeper-test-0"}
    for var in container["env"]:
        assert var["name"] in env, f"env {var['name']} is not provided by this test"
    log = (workdir / "serve.log").open("w")
    argv = [sys.executable, "-m", "gangkeeper.webhook.cli", *args]  # args[0]: serve
    argv += ["--kubeconfig", str(control_plane.kubeconfig)]
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        yield port, workdir, process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()


def _readyz(port: int, ca: bytes) -> bool:
    """GET /readyz on 127.0.0.1, verifying the certificate for the Service's DNS name."""
    context = ssl.create_default_context(cadata=ca.decode())
    request = httpx.Request(
        "GET", f"https://127.0.0.1:{port}/readyz", extensions={"sni_hostname": SERVICE_HOST}
    )
    try:
        with httpx.Client(verify=context, timeout=2) as http:
            response = http.send(request)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def test_serve_with_the_deployment_arguments_becomes_ready_with_the_secrets_certificate(
    control_plane: ControlPlane, served: Any
) -> None:
    port, workdir, process = served
    calls = ClientCalls(control_plane.api_client)

    def ready() -> bytes | None:
        if process.poll() is not None:
            raise AssertionError((workdir / "serve.log").read_text()[-3000:])
        secret = calls.read_secret(NAMESPACE, SECRET_NAME) or {}
        ca = base64.b64decode((secret.get("data") or {}).get("ca.crt", ""))
        return ca if ca and _readyz(port, ca) else None

    ca = control_plane.wait_for(ready, timeout=90, message="gangkeeper serve /readyz")
    expected = base64.b64encode(ca).decode()
    configs: list[tuple[WebhookKind, str]] = [
        ("mutating", "gangkeeper-mutating"),
        ("validating", "gangkeeper-validating"),
    ]
    for kind, name in configs:
        config = calls.read_webhook_configuration(kind, name)
        assert config is not None
        assert {h["clientConfig"].get("caBundle") for h in config["webhooks"]} == {expected}
    assert (workdir / "certs" / "ca.crt").read_bytes() == ca
