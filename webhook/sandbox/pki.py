"""The sandbox control plane's PKI: one CA, the API server's serving certificate,
client certificates for each component, and the service-account signing key.

Writes PEM files into a directory it is given and nothing else; no network, no
processes. The certificates are for a throwaway loopback cluster (short-lived keys
are not worth the complexity here), but they are real: the API server authenticates
every component by its client certificate and authorises it through RBAC, exactly
as in a kubeadm cluster.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gangkeeper.certs.issue import build_ca, build_leaf, san_entries

#: Long enough for any sandbox session; the sandbox is torn down, not renewed.
VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key on disk."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class ClusterPKI:
    """Every file the control-plane components are started with."""

    ca: KeyPair
    apiserver: KeyPair
    admin: KeyPair
    gangkeeper: KeyPair
    controller_manager: KeyPair
    scheduler: KeyPair
    #: The serving certificate of the neighbours' webhook servers (JobSet, LWS).
    webhooks: KeyPair
    #: What kube-apiserver presents to webhooks (`admission_config`).
    webhook_client: KeyPair
    service_account_key: Path
    service_account_pub: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # Created 0600 from the start, so the key is never readable by others.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def create_pki(
    directory: Path,
    *,
    service_ip: str,
    gangkeeper_service_account: tuple[str, str],
) -> ClusterPKI:
    """Issue the whole PKI into `directory` (created if needed) and return the paths.

    `service_ip` is the first address of the service range: in-cluster clients reach
    the API server as `kubernetes.default.svc` at that address, so it is a SAN.
    `gangkeeper_service_account` (namespace, name) is the identity of gangkeeper's
    client certificate.
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    ca_cert = build_ca(_name("gangkeeper-sandbox-ca"), ca_key, now, VALIDITY)
    ca = KeyPair(directory / "ca.crt", directory / "ca.key")
    _write_cert(ca.cert, ca_cert)
    _write_key(ca.key, ca_key)

    def issue(
        stem: str,
        subject: x509.Name,
        *,
        server: bool = False,
        dns_names: Sequence[str] = (),
        ip_addresses: Sequence[str] = (),
    ) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        sans = san_entries(dns_names, ip_addresses)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        cert = build_leaf(
            ca_cert, ca_key, subject, key, now=now, lifetime=VALIDITY, usage=usage, sans=sans
        )
        pair = KeyPair(directory / f"{stem}.crt", directory / f"{stem}.key")
        _write_cert(pair.cert, cert)
        _write_key(pair.key, key)
        return pair

    apiserver = issue(
        "apiserver",
        _name("kube-apiserver"),
        server=True,
        dns_names=(
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
        ip_addresses=("127.0.0.1", service_ip),
    )
    # The identities below are the ones RBAC's bootstrap policy already binds:
    # system:masters is cluster-admin, the two component users have their own roles.
    admin = issue("admin", _name("gangkeeper-sandbox-admin", ["system:masters"]))
    # gangkeeper authenticates as its ServiceAccount would in a pod, so the RBAC its
    # install manifests grant that account is exactly what it may do here.
    namespace, account = gangkeeper_service_account
    gangkeeper = issue(
        "gangkeeper",
        _name(
            f"system:serviceaccount:{namespace}:{account}",
            ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
        ),
    )
    controller_manager = issue("controller-manager", _name("system:kube-controller-manager"))
    scheduler = issue("scheduler", _name("system:kube-scheduler"))
    webhooks = issue(
        "webhooks",
        _name("gangkeeper-sandbox-webhooks"),
        server=True,
        dns_names=("localhost",),
        ip_addresses=("127.0.0.1",),
    )
    webhook_client = issue("webhook-client", _name("kube-apiserver-webhook-client"))

    # RSA because every Kubernetes release accepts it for service-account tokens.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_key_path = directory / "sa.key"
    sa_pub_path = directory / "sa.pub"
    _write_key(sa_key_path, sa_key)
    sa_pub_path.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return ClusterPKI(
        ca=ca,
        apiserver=apiserver,
        admin=admin,
        gangkeeper=gangkeeper,
        controller_manager=controller_manager,
        scheduler=scheduler,
        webhooks=webhooks,
        webhook_client=webhook_client,
        service_account_key=sa_key_path,
        service_account_pub=sa_pub_path,
    )
