"""The Deployments that run `gangkeeper serve`, and the config file its ConfigMap carries.

By default admission and the gang controller run as two Deployments of the same image,
as Kyverno runs its admission and background controllers and Gatekeeper its webhook
and audit: `gangkeeper` (`serve --no-controller`: /mutate, /validate) and
`gangkeeper-controller` (`serve --controller-only`). Two pods rather than two
containers of one pod, so that the processes share nothing but the API server (no
network namespace, volume or eviction), each Deployment is sized, scaled and rolled on
its own, and the webhook's Service, PodDisruptionBudget and anti-affinity select only
admission pods: the controller's pods carry another `app.kubernetes.io/name`
(`gangkeeper-controller`), so the webhook Deployment's selector, which Kubernetes does
not let an upgrade change, stays what it was. Both replicas of the controller run; the
Lease (`gangkeeper-controller`) lets one act, the other takes over within the lease.
Both Deployments use the one ServiceAccount `gangkeeper`: the pod-update admission
policy names it, and the single-process mode needs all of its rules in one process.
`single_process=True` renders the one Deployment `gangkeeper` running both (`serve`),
for small clusters and development.

Pure: builds dicts and text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import yaml

from gangkeeper.policies.names import APP_NAME, CONFIGMAP_NAME, SECRET_NAME, SERVICE_NAME
from gangkeeper.policies.settings.config import DEFAULT_GPU_RESOURCES

from .objects import LABELS, CertMode, Manifest, metadata

DEFAULT_IMAGE = "ghcr.io/gangkeeper/gangkeeper:0.1.0"
#: The controller's Deployment, and the `app.kubernetes.io/name` of its pods.
CONTROLLER_NAME = f"{APP_NAME}-controller"
CONTAINER_PORT = 8443
CERT_DIR = "/var/run/gangkeeper/certs"
CONFIG_DIR = "/etc/gangkeeper"
#: What a Deployment's `serve` runs: admission, the gang controller, or both.
Role = Literal["webhook", "controller", "both"]
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


def _container(name: str, cert_mode: CertMode, image: str, mode: Sequence[str]) -> Manifest:
    """`gangkeeper serve` with `mode` (`--no-controller`, `--controller-only` or
    nothing), last so the cert-manager overlay's patch finds `--cert-mode` where it was."""
    env = [
        # `serve` reads its namespace (Lease, Secret) and its controller identity from these.
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    return {
        "name": name,
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
            *mode,
        ],
        "env": env,
        # The controller serves /healthz, /readyz and /metrics on the same HTTPS port
        # (with the same certificate: a ServiceMonitor needs one TLS configuration).
        "ports": [{"name": "https", "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
        "startupProbe": _probe("/healthz", 2, 30),
        "livenessProbe": _probe("/healthz", 10, 3),
        "readinessProbe": _probe("/readyz", 5, 2),
        # Each process's caches grow with the cluster's pods (docs/install.md, "Two
        # processes"; docs/performance.md, "Memory": 210 MB at 50,000 pods for both in
        # one process), so the limit leaves room for a 50,000-pod cluster in each.
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


def deployment(
    namespace: str,
    cert_mode: CertMode,
    image: str,
    *,
    role: Role = "both",
) -> Manifest:
    """The Deployment of `role`: "webhook" (admission only, Deployment `gangkeeper`),
    "controller" (`gangkeeper-controller`) or "both" (the single-process mode)."""
    if role not in ("webhook", "controller", "both"):
        raise ValueError(f"role must be webhook, controller or both, got {role!r}")
    name = CONTROLLER_NAME if role == "controller" else APP_NAME
    selector = {"app.kubernetes.io/name": name}
    cert_volume: Manifest
    if cert_mode == "self":
        # Written by the process from the shared Secret; memory-backed, never on disk.
        cert_volume = {"name": "certs", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}
    else:
        cert_volume = {"name": "certs", "secret": {"secretName": SECRET_NAME}}
    mode = {"webhook": ["--no-controller"], "controller": ["--controller-only"], "both": []}
    container = _container(
        "controller" if role == "controller" else APP_NAME, cert_mode, image, mode[role]
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(name, namespace),
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": selector},
            "strategy": {
                "type": "RollingUpdate",
                # Never below one ready replica: the mutating webhook fails closed (and a
                # controller standby is ready to take the Lease).
                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
            },
            "template": {
                "metadata": {"labels": {**LABELS, **selector}},
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


def deployments(
    namespace: str, cert_mode: CertMode, image: str, *, single_process: bool = False
) -> list[Manifest]:
    """The webhook's and the controller's Deployments, or the one that runs both."""
    if single_process:
        return [deployment(namespace, cert_mode, image, role="both")]
    return [
        deployment(namespace, cert_mode, image, role="webhook"),
        deployment(namespace, cert_mode, image, role="controller"),
    ]
