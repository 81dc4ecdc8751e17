"""cert-manager mode: a self-signed Issuer and the serving Certificate. Pure."""

from __future__ import annotations

from gangkeeper.policies.names import CERTIFICATE_NAME, ISSUER_NAME, SECRET_NAME, SERVICE_NAME

from .objects import Manifest, metadata


def cert_manager_objects(namespace: str) -> list[Manifest]:
    dns = [SERVICE_NAME, f"{SERVICE_NAME}.{namespace}", f"{SERVICE_NAME}.{namespace}.svc"]
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
            "metadata": metadata(CERTIFICATE_NAME, namespace),
            "spec": {
                "secretName": SECRET_NAME,
                "dnsNames": dns,
                "duration": "2160h",
                "renewBefore": "720h",
                "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
                "issuerRef": {"kind": "Issuer", "name": ISSUER_NAME},
            },
        },
    ]
