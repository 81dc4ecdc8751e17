"""The Deployment that runs `gangkeeper serve`, and the config file its ConfigMap carries.

Pure: builds dicts and text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from gangkeeper.policies.names import APP_NAME, CONFIGMAP_NAME, SECRET_NAME, SERVICE_NAME
from gangkeeper.policies.settings.config import DEFAULT_GPU_RESOURCES

from .objects import LABELS, CertMode, Manifest, metadata

DEFAULT_IMAGE = "ghcr.io/gangkeeper/gangkeeper:0.1.0"
CONTAINER_PORT = 8443
CERT_DIR = "/var/run/gangkeeper/certs"
CONFIG_DIR = "/etc/gangkeeper"
#: Numeric, non-root; the Dockerfile creates the same UID.
RUN_AS = 65532


def config_document(
    backend: str,
    *,
    autoscaling: bool = True,
    provisioning_requests: bool = False,
    gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
) -> str:
    """The config file the ConfigMap carries (read by `gangkeeper serve --config`)."""
    data: dict[str, Any] = {"backend": backend}
    if tuple(gpu_resources) != DEFAULT_GPU_RESOURCES:
        # The server must count as GPUs what the webhooks' filter lets through.
        data["gpuResources"] = list(gpu_resources)
    if not autoscaling:  # without its RBAC the controller must not try placeholders
        data["autoscaling"] = "off"
    elif provisioning_requests:
        data["autoscaling"] = "provisioningrequest"
    return yaml.safe_dump(data, sort_keys=False)


def _security_context() -> Manifest:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _probe(path: str, period: int, failures: int) -> Manifest:
    return {
        "httpGet": {"path": path, "port": "https", "scheme": "HTTPS"},
        "periodSeconds": period,
        "timeoutSeconds": 2,
        "failureThreshold": failures,
    }


def deployment(namespace: str, cert_mode: CertMode, image: str) -> Manifest:
    selector = {"app.kubernetes.io/name": APP_NAME}
    cert_volume: Manifest
    if cert_mode == "self":
        # Written by the process from the shared Secret; memory-backed, never on disk.
        cert_volume = {"name": "certs", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}
    else:
        cert_volume = {"name": "certs", "secret": {"secretName": SECRET_NAME}}
    env = [
        # `serve` reads its namespace (Lease, Secret) and its controller identity from these.
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    container: Manifest = {
        "name": APP_NAME,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        # The image's ENTRYPOINT is `gangkeeper`: the subcommand comes first.
        "args": [
            "serve",
            "--config",
            f"{CONFIG_DIR}/config.yaml",
            "--cert-dir",
            CERT_DIR,
            "--cert-mode",
            cert_mode,
            "--service",
            SERVICE_NAME,
            "--host",
            "0.0.0.0",
            "--port",
            str(CONTAINER_PORT),
        ],
        "env": env,
        "ports": [{"name": "https", "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
        "startupProbe": _probe("/healthz", 2, 30),
        "livenessProbe": _probe("/healthz", 10, 3),
        "readinessProbe": _probe("/readyz", 5, 2),
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"memory": "512Mi"},
        },
        "securityContext": _security_context(),
        "volumeMounts": [
            {"name": "certs", "mountPath": CERT_DIR, "readOnly": cert_mode != "self"},
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(APP_NAME, namespace),
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": selector},
            "strategy": {
                "type": "RollingUpdate",
                # Never below one ready replica: the mutating webhook fails closed.
                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
            },
            "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {
                    "serviceAccountName": APP_NAME,
                    "automountServiceAccountToken": True,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUN_AS,
                        "runAsGroup": RUN_AS,
                        "fsGroup": RUN_AS,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "affinity": {
                        "podAntiAffinity": {
                            # Preferred, not required: a one-node cluster still runs both.
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "podAffinityTerm": {
                                        "labelSelector": {"matchLabels": selector},
                                        "topologyKey": "kubernetes.io/hostname",
                                    },
                                }
                            ]
                        }
                    },
                    "containers": [container],
                    "volumes": [
                        cert_volume,
                        {"name": "config", "configMap": {"name": CONFIGMAP_NAME}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                    ],
                },
            },
        },
    }
