"""cert-manager mode against a real API server that has cert-manager's CRDs.

What runs: the CRDs of cert-manager v1.21.2 (copied from its root Go module by
`deploy/sandbox/build.sh cert-manager`) are installed in the deploy tests' control
plane, so the API server validates Issuers and Certificates against cert-manager's own
schemas. What does not run: cert-manager's controller and cainjector (nested Go modules
the module proxy does not serve), so nothing issues a certificate or injects a CA here.
In their place the test writes the Secret the way cert-manager's self-signed issuer
does (type kubernetes.io/tls, keys tls.crt, tls.key, ca.crt) and projects it into a
directory the way the kubelet does (timestamped folder + `..data` symlink swap).

- the overlay `deploy/overlays/cert-manager` and the chart with `certMode:
  cert-manager` are accepted by the API server (server-side dry run of every object,
  and the Issuer and Certificate created for real and read back);
- a Certificate cert-manager's schema forbids is refused, so the check is real;
- `gangkeeper serve` with the cert-manager Deployment's arguments serves the Secret's
  certificate and, when the Secret is renewed with a new key, serves the new one
  without a restart.
"""

from __future__ import annotations

import base64
import datetime
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from deploy_support import REPO, ControlPlane
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gangkeeper.webhook.install import render_manifests
from gangkeeper.webhook.sandbox import BinariesMissing, find_cert_manager_crds
from gangkeeper.webhook.sandbox.processes import free_port

pytestmark = pytest.mark.e2e

NAMESPACE = "gangkeeper-system"
CHART = REPO / "deploy" / "helm" / "gangkeeper"
#: The serving test's own namespace: the kustomize install's Secret in gangkeeper-system
#: is self-managed (type Opaque, which cannot become kubernetes.io/tls).
SERVE_NAMESPACE = "gk-cert-manager-serve"
DNS = ["gangkeeper", f"gangkeeper.{SERVE_NAMESPACE}", f"gangkeeper.{SERVE_NAMESPACE}.svc"]


@pytest.fixture(scope="module")
def with_crds(control_plane: ControlPlane) -> ControlPlane:
    try:
        crds = find_cert_manager_crds()
    except BinariesMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    control_plane.kubectl("apply", "--server-side", "-f", str(crds))
    for kind in ("certificates", "issuers"):
        control_plane.kubectl(
            "wait", "--for=condition=Established", f"crd/{kind}.cert-manager.io", "--timeout=60s"
        )
    return control_plane


def dry_run_apply(cp: ControlPlane, text: str) -> str:
    return cp.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=text).stdout


def test_the_overlay_is_accepted_by_the_api_server(with_crds: ControlPlane) -> None:
    rendered = with_crds.kubectl("kustomize", str(REPO / "deploy" / "overlays" / "cert-manager"))
    out = dry_run_apply(with_crds, rendered.stdout)
    assert "certificate.cert-manager.io/gangkeeper-serving serverside-applied" in out
    assert "issuer.cert-manager.io/gangkeeper-selfsigned serverside-applied" in out


def test_the_charts_cert_manager_objects_are_accepted_and_stored(
    with_crds: ControlPlane, helm_bin: Path
) -> None:
    namespace = with_crds.namespace("gk-cert-manager", {})
    done = subprocess.run(
        [str(helm_bin), "template", "gangkeeper", str(CHART), "-n", namespace,
         "--set", "certMode=cert-manager"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    dry_run_apply(with_crds, yaml.safe_dump_all(docs))
    certificates = [d for d in docs if d["apiVersion"] == "cert-manager.io/v1"]
    assert sorted(d["kind"] for d in certificates) == ["Certificate", "Certificate", "Issuer",
                                                       "Issuer"]
    with_crds.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(certificates))
    custom = client.CustomObjectsApi(with_crds.api_client)
    for expected in [d for d in certificates if d["kind"] == "Certificate"]:
        stored = custom.get_namespaced_custom_object(
            "cert-manager.io", "v1", namespace, "certificates", expected["metadata"]["name"]
        )
        assert stored["spec"] == expected["spec"]
    stored = custom.get_namespaced_custom_object(
        "cert-manager.io", "v1", namespace, "certificates", "gangkeeper-serving"
    )
    assert f"gangkeeper.{namespace}.svc" in stored["spec"]["dnsNames"]
    (hooks,) = [d for d in docs if d["kind"] == "MutatingWebhookConfiguration"]
    assert hooks["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"{namespace}/gangkeeper-serving"
    }


def test_a_certificate_cert_managers_schema_forbids_is_refused(with_crds: ControlPlane) -> None:
    (certificate,) = [
        o for o in render_manifests(cert_mode="cert-manager")
        if o["kind"] == "Certificate" and o["metadata"]["name"] == "gangkeeper-serving"
    ]
    certificate["spec"]["privateKey"]["algorithm"] = "DSA"
    custom = client.CustomObjectsApi(with_crds.api_client)
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object(
            "cert-manager.io", "v1", NAMESPACE, "certificates", certificate, dry_run="All"
        )
    assert caught.value.status == 422
    assert "spec.privateKey.algorithm" in str(caught.value.body)


# --- serving a certificate from a Secret in cert-manager's format ---------------------------


SERVING_KEY_USAGE = x509.KeyUsage(
    digital_signature=True,
    key_encipherment=True,
    content_commitment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=False,
    crl_sign=False,
    encipher_only=False,
    decipher_only=False,
)


def self_signed(serial: int) -> tuple[bytes, bytes]:
    """What cert-manager's selfSigned issuer writes: a certificate signed by its own
    key (so ca.crt is the certificate itself), ECDSA P-256 as the Certificate asks."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([]))
        .issuer_name(x509.Name([]))
        .public_key(key.public_key())
        .serial_number(serial)
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=2160))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in DNS]), critical=True
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(SERVING_KEY_USAGE, critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def write_secret(core: Any, serial: int) -> bytes:
    cert, key = self_signed(serial)
    body = {
        "metadata": {
            "name": "gangkeeper-tls",
            "annotations": {
                "cert-manager.io/certificate-name": "gangkeeper-serving",
                "cert-manager.io/issuer-name": "gangkeeper-selfsigned",
                "cert-manager.io/issuer-kind": "Issuer",
                "cert-manager.io/alt-names": ",".join(DNS),
            },
        },
        "type": "kubernetes.io/tls",
        "data": {
            k: base64.b64encode(v).decode()
            for k, v in (("tls.crt", cert), ("tls.key", key), ("ca.crt", cert))
        },
    }
    try:
        core.replace_namespaced_secret("gangkeeper-tls", SERVE_NAMESPACE, body)
    except ApiException as exc:
        if exc.status != 404:
            raise
        core.create_namespaced_secret(SERVE_NAMESPACE, body)
    return cert


def project(core: Any, directory: Path, generation: int) -> None:
    """The Secret's keys as the kubelet's atomic writer lays a secret volume out: a new
    timestamped folder, then `..data` swapped to it in one rename; the key files are
    symlinks through `..data`, so a reader never sees half of an update."""
    secret = core.read_namespaced_secret("gangkeeper-tls", SERVE_NAMESPACE)
    folder = directory / f"..2026_12_01_00_00_0{generation}.000000000"
    folder.mkdir()
    for key, value in secret.data.items():
        (folder / key).write_bytes(base64.b64decode(value))
    link = directory / "..data_tmp"
    link.symlink_to(folder.name)
    link.replace(directory / "..data")
    for key in secret.data:
        if not (directory / key).is_symlink():
            (directory / key).symlink_to(f"..data/{key}")


def served_certificate(port: int, ca: bytes) -> bytes | None:
    context = ssl.create_default_context(cadata=ca.decode())
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=2) as raw,
            context.wrap_socket(raw, server_hostname=DNS[2]) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError):
        return None
    return x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM)


@pytest.fixture
def cert_manager_serve(with_crds: ControlPlane, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    with_crds.namespace(SERVE_NAMESPACE, {})
    (deployment,) = [
        o
        for o in render_manifests(SERVE_NAMESPACE, cert_mode="cert-manager")
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "gangkeeper"
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args: list[str] = list(container["args"])
    assert args[args.index("--cert-mode") + 1] == "cert-manager"
    port = free_port()
    certs = tmp_path / "certs"
    certs.mkdir()
    (tmp_path / "config.yaml").write_text("backend: gate\n")
    for flag, value in (
        ("--cert-dir", str(certs)),
        ("--host", "127.0.0.1"),
        ("--port", str(port)),
        ("--config", str(tmp_path / "config.yaml")),
    ):
        args[args.index(flag) + 1] = value
    env = {**os.environ, "POD_NAMESPACE": SERVE_NAMESPACE, "POD_NAME": "gangkeeper-cm-0"}
    argv = [sys.executable, "-m", "gangkeeper.webhook.cli", *args]  # args[0]: serve
    assert "--no-controller" in args  # the webhook's Deployment: admission only
    argv += ["--kubeconfig", str(with_crds.kubeconfig)]
    log = (tmp_path / "serve.log").open("w")
    # Started before the files exist: cert-manager writes the Secret after the pod starts.
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        yield port, certs
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()
        if process.returncode not in (0, -15):
            print((tmp_path / "serve.log").read_text()[-3000:])


def test_serve_reads_and_hot_reloads_a_secret_in_cert_managers_format(
    with_crds: ControlPlane, cert_manager_serve: tuple[int, Path]
) -> None:
    port, certs = cert_manager_serve
    core = client.CoreV1Api(with_crds.api_client)
    first = write_secret(core, serial=1)
    project(core, certs, 1)
    assert with_crds.wait_for(
        lambda: served_certificate(port, first) == first, timeout=60, message="first certificate"
    )

    # Renewal: cert-manager replaces the Secret (rotationPolicy Always: a new key too);
    # the kubelet swaps the projected files; the server picks them up while running.
    second = write_secret(core, serial=2)
    assert second != first
    project(core, certs, 2)
    started = time.monotonic()
    assert with_crds.wait_for(
        lambda: served_certificate(port, second) == second,
        timeout=60,
        message="renewed certificate",
    )
    assert time.monotonic() - started < 60
