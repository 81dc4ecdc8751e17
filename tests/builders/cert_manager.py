"""What cert-manager's controller, its CA injector and the kubelet do with gangkeeper's
cert-manager objects, done by hand on a cluster that runs none of them.

`CertManager` reads the Issuers and Certificates `gangkeeper manifests --cert-mode
cert-manager` renders (`cert_manager_objects`) and issues each Certificate the way its
Issuer kind does: `selfSigned` signs the certificate with its own new key (so the
Secret's `ca.crt` is the certificate itself), `ca` signs with the key pair of the
Secret it names (so `ca.crt` is that CA, unchanged across renewals of the leaf). A
renewal issues a new key (`rotationPolicy: Always`). The serving names are the
sandbox's (it registers a URL on loopback), not the Service's.

`inject_ca_bundle` is the CA injector: the Secret's `ca.crt` into every webhook's
`caBundle`. `project` is the kubelet's atomic writer for a Secret volume. The timing
between the three is the test's: in a cluster they act independently.

Writes only to the API server (the Secret, the two webhook configurations) and to the
directory it is given. Mocks nothing.
"""

from __future__ import annotations

import base64
import datetime
import json
import socket
import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes.client.exceptions import ApiException

from gangkeeper.certs.issue import build_ca, build_leaf, load_certificates, load_key, san_entries
from gangkeeper.policies.names import WEBHOOK_CONFIGURATIONS

#: The Secret's keys, as cert-manager writes them (Secret type kubernetes.io/tls).
KEYS = ("tls.crt", "tls.key", "ca.crt")


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def serial_of(pem: bytes) -> int:
    return load_certificates(pem, "tls.crt")[0].serial_number


class CertManager:
    """cert-manager's issuance for the given Issuers and Certificates (dicts)."""

    def __init__(
        self, objects: Sequence[Mapping[str, Any]], dns_names: Sequence[str],
        ip_addresses: Sequence[str],
    ) -> None:
        self.issuers = {o["metadata"]["name"]: o["spec"] for o in objects
                        if o["kind"] == "Issuer"}
        self.certificates = {o["metadata"]["name"]: o["spec"] for o in objects
                             if o["kind"] == "Certificate"}
        self.sans = san_entries(dns_names, ip_addresses)
        #: Secret name -> its data, as issued last.
        self.secrets: dict[str, dict[str, bytes]] = {}

    def issue(self, certificate: str) -> dict[str, bytes]:
        """Issue (or renew) `certificate`; its Secret's data."""
        spec = self.certificates[certificate]
        issuer = self.issuers[spec["issuerRef"]["name"]]
        now = datetime.datetime.now(datetime.UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        is_ca = bool(spec.get("isCA"))
        subject = x509.Name([x509.NameAttribute(
            NameOID.COMMON_NAME, spec.get("commonName") or certificate)])
        lifetime = datetime.timedelta(hours=float(str(spec.get("duration", "2160h"))[:-1]))
        if "selfSigned" in issuer:
            cert = build_ca(subject, key, now, lifetime) if is_ca else self._self_signed_leaf(
                subject, key, now, lifetime)
            ca = _pem(cert)
        else:
            ca_secret = self._ca_secret(str(issuer["ca"]["secretName"]))
            ca_cert = load_certificates(ca_secret["tls.crt"], "ca tls.crt")[0]
            ca_key = load_key(ca_secret["tls.key"], "ca tls.key")
            cert = build_leaf(ca_cert, ca_key, subject, key, now=now, lifetime=lifetime,
                              usage=ExtendedKeyUsageOID.SERVER_AUTH, sans=self.sans)
            ca = ca_secret["tls.crt"]
        data = {"tls.crt": _pem(cert), "tls.key": _key_pem(key), "ca.crt": ca}
        self.secrets[str(spec["secretName"])] = data
        return data

    def _ca_secret(self, secret_name: str) -> dict[str, bytes]:
        if secret_name not in self.secrets:
            (owner,) = [n for n, s in self.certificates.items() if s["secretName"] == secret_name]
            self.issue(owner)
        return self.secrets[secret_name]

    def _self_signed_leaf(
        self, subject: x509.Name, key: ec.EllipticCurvePrivateKey, now: datetime.datetime,
        lifetime: datetime.timedelta,
    ) -> x509.Certificate:
        return (
            x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + lifetime)
            .add_extension(x509.SubjectAlternativeName(self.sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )


# -- the Secret, the CA injector, the kubelet ----------------------------------------------


def write_secret(cluster: Any, namespace: str, name: str, data: Mapping[str, bytes]) -> None:
    """Create or replace the Secret as cert-manager does (type kubernetes.io/tls)."""
    body = {
        "metadata": {"name": name, "namespace": namespace},
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(data[k]).decode() for k in KEYS},
    }
    try:
        cluster.core.replace_namespaced_secret(name, namespace, body)
    except ApiException as exc:
        if exc.status != 404:
            raise
        cluster.core.create_namespaced_secret(namespace, body)


def read_secret(cluster: Any, namespace: str, name: str) -> dict[str, bytes]:
    secret = cluster.core.read_namespaced_secret(name, namespace)
    return {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}


def ca_bundles(cluster: Any) -> set[bytes]:
    """Every caBundle of gangkeeper's webhooks (one, when they agree)."""
    found: set[bytes] = set()
    for kind, name in zip(("mutatingwebhookconfiguration", "validatingwebhookconfiguration"),
                          WEBHOOK_CONFIGURATIONS, strict=True):
        config = json.loads(cluster.kubectl("get", kind, name, "-o", "json").stdout)
        found |= {base64.b64decode(w["clientConfig"]["caBundle"]) for w in config["webhooks"]}
    return found


def inject_ca_bundle(cluster: Any, ca_pem: bytes) -> None:
    """The CA injector: `ca_pem` into every webhook of both configurations."""
    value = base64.b64encode(ca_pem).decode()
    for kind, name in zip(("mutatingwebhookconfiguration", "validatingwebhookconfiguration"),
                          WEBHOOK_CONFIGURATIONS, strict=True):
        config = json.loads(cluster.kubectl("get", kind, name, "-o", "json").stdout)
        ops = [{"op": "replace", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": value}
               for i in range(len(config["webhooks"]))]
        cluster.kubectl("patch", kind, name, "--type=json", "-p", json.dumps(ops))


def project(data: Mapping[str, bytes], directory: Path, generation: int) -> None:
    """The Secret's keys laid out as the kubelet's atomic writer does: a new timestamped
    folder, then `..data` swapped to it in one rename; each key is a symlink through
    `..data` (a plain file left by another writer is replaced by the symlink once)."""
    folder = directory / f"..2026_12_01_00_00_{generation:02d}.000000000"
    folder.mkdir()
    for key in KEYS:
        (folder / key).write_bytes(data[key])
    link = directory / "..data_tmp"
    link.unlink(missing_ok=True)
    link.symlink_to(folder.name)
    link.replace(directory / "..data")
    for key in KEYS:
        if not (directory / key).is_symlink():
            temporary = directory / f"..{key}_tmp"
            temporary.unlink(missing_ok=True)
            temporary.symlink_to(f"..data/{key}")
            temporary.replace(directory / key)


def served_serial(url: str) -> int | None:
    """The serial of the certificate a TLS handshake with `url` is served now (not
    verified: this reads what is served, whoever signed it); None when none answers."""
    host, port = url.removeprefix("https://").split(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, int(port)), timeout=5) as raw, \
                context.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    except OSError:
        return None
    return x509.load_der_x509_certificate(der).serial_number if der else None
