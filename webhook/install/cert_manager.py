"""cert-manager mode: a CA of gangkeeper's own and the serving Certificate it signs. Pure.

The chain cert-manager documents for webhooks: a self-signed Issuer signs only a
long-lived CA Certificate, and a CA Issuer made from that CA's Secret signs the serving
certificate. The CA injector copies the serving Secret's `ca.crt` (the CA) into the
webhooks' `caBundle`, so renewing the serving certificate (every 60 days, with a new
key) leaves `caBundle` as it was, and the API server trusts the old and the new
certificate alike while the kubelet swaps the mounted files. A self-signed serving
certificate would be its own `ca.crt`: each renewal would change `caBundle` at one
moment and the files at another, and every admission in between would fail
(tests/e2e/test_cert_renewal_replicas.py).
"""

from __future__ import annotations

from gangkeeper.policies.names import (
    CA_CERTIFICATE_NAME,
    CA_ISSUER_NAME,
    CERTIFICATE_NAME,
    ISSUER_NAME,
    SECRET_NAME,
    SERVICE_NAME,
)

from .objects import Manifest, metadata

#: The CA outlives many serving certificates; its own renewal changes caBundle (docs/install.md).
CA_DURATION = "87600h"
CA_RENEW_BEFORE = "8760h"


def cert_manager_objects(namespace: str) -> list[Manifest]:
    dns = [SERVICE_NAME, f"{SERVICE_NAME}.{namespace}", f"{SERVICE_NAME}.{namespace}.svc"]
    key = {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"}
    return [
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Issuer",
            "metadata": metadata(ISSUER_NAME, namespace),
            "spec": {"selfSigned": {}},
        },
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": metadata(CA_CERTIFICATE_NAME, namespace),
            "spec": {
                "isCA": True,
                "commonName": CA_CERTIFICATE_NAME,
                "secretName": CA_CERTIFICATE_NAME,
                "duration": CA_DURATION,
                "renewBefore": CA_RENEW_BEFORE,
                "privateKey": dict(key),
                "issuerRef": {"kind": "Issuer", "name": ISSUER_NAME},
            },
        },
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Issuer",
            "metadata": metadata(CA_ISSUER_NAME, namespace),
            "spec": {"ca": {"secretName": CA_CERTIFICATE_NAME}},
        },
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": metadata(CERTIFICATE_NAME, namespace),
            "spec": {
                "secretName": SECRET_NAME,
                "dnsNames": dns,
                "duration": "2160h",
                "renewBefore": "720h",
                "privateKey": dict(key),
                "issuerRef": {"kind": "Issuer", "name": CA_ISSUER_NAME},
            },
        },
    ]
