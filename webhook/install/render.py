"""Every object of an installation, in apply order: `render_manifests(...)`.

The single source of `deploy/base` (committed, and checked by a test to equal this
output), of `gangkeeper manifests`, and of the out-of-cluster registration the sandbox
and local tests apply (`url` + `ca_bundle`).

Pure: builds data, reads no file and talks to no cluster.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from gangkeeper.policies.names import (
    APP_NAME,
    CONFIGMAP_NAME,
    DEFAULT_NAMESPACE,
    SECRET_NAME,
    SERVICE_NAME,
)
from gangkeeper.policies.settings.config import DEFAULT_GPU_RESOURCES

from .cert_manager import cert_manager_objects
from .deployment import DEFAULT_IMAGE, config_document, deployments
from .network_policy import network_policy
from .objects import BACKENDS, CERT_MODES, LABELS, CertMode, Manifest, metadata
from .placeholders import priority_class
from .pod_update_policy import pod_update_policy
from .rbac import rbac_objects
from .webhooks import webhook_configurations


def render_manifests(
    namespace: str = DEFAULT_NAMESPACE,
    backend: str = "gate",
    url: str | None = None,
    ca_bundle: str | bytes | None = None,
    cert_mode: CertMode = "self",
    *,
    image: str = DEFAULT_IMAGE,
    autoscaling: bool = True,
    provisioning_requests: bool = False,
    gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
    single_process: bool = False,
) -> list[Manifest]:
    """Every object of an installation, in apply order.

    With `url` (and `ca_bundle`, the PEM of the CA) only the two webhook configurations,
    pointing at `url/mutate` and `url/validate`: how an out-of-cluster server is
    registered. In cluster, `cert_mode="self"` leaves caBundle empty for gangkeeper to
    inject; `"cert-manager"` adds an Issuer and a Certificate and lets cert-manager's CA
    injector fill it. `autoscaling=False` (config `autoscaling: off`) leaves out the
    placeholders' PriorityClass and RBAC; `provisioning_requests=True` (config
    `autoscaling: provisioningrequest`) adds the RBAC for ProvisioningRequests and
    their PodTemplates (the placeholders' stays: they stand in where it is not served).
    `gpu_resources` (config `gpuResources`) are the accelerators the pod webhooks'
    match conditions let through, and go into the ConfigMap's config when they are not
    the default list. Admission and the gang controller run in two Deployments
    (`deployment.py` says why); `single_process=True` runs both in one.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if cert_mode not in CERT_MODES:
        raise ValueError(f"cert_mode must be one of {', '.join(CERT_MODES)}, got {cert_mode!r}")
    if not namespace:
        raise ValueError("namespace must not be empty")
    encoded: str | None = None
    if ca_bundle is not None:
        pem = ca_bundle.encode() if isinstance(ca_bundle, str) else ca_bundle
        if b"-----BEGIN CERTIFICATE-----" not in pem:
            raise ValueError("ca_bundle is not a PEM certificate bundle")
        encoded = base64.b64encode(pem).decode()
    if url is not None:
        if not url.startswith("https://"):
            raise ValueError(
                f"url must start with https:// (the API server only calls HTTPS), got {url!r}"
            )
        return webhook_configurations(
            namespace, url=url, ca_bundle=encoded, gpu_resources=gpu_resources
        )

    objects: list[Manifest] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": namespace,
                "labels": {
                    **LABELS,
                    # Pod Security: gangkeeper's own pods run under `restricted`.
                    "pod-security.kubernetes.io/enforce": "restricted",
                },
            },
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(APP_NAME, namespace)},
        *rbac_objects(namespace, cert_mode, autoscaling=autoscaling,
                      provisioning_requests=provisioning_requests),
        *pod_update_policy(namespace),
        *([priority_class()] if autoscaling else []),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata(CONFIGMAP_NAME, namespace),
            "data": {"config.yaml": config_document(
                backend, autoscaling=autoscaling, provisioning_requests=provisioning_requests,
                gpu_resources=gpu_resources,
            )},
        },
    ]
    if cert_mode == "self":
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": metadata(SECRET_NAME, namespace),
                # Filled by gangkeeper; shipped empty so RBAC needs no `create` on Secrets.
                "type": "Opaque",
            }
        )
    else:
        objects += cert_manager_objects(namespace)
    objects += [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(SERVICE_NAME, namespace),
            "spec": {
                "selector": {"app.kubernetes.io/name": APP_NAME},
                "ports": [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}],
            },
        },
        # The Service selects the webhook's pods only (the controller's carry another
        # app.kubernetes.io/name): the API server never calls a controller process.
        *deployments(namespace, cert_mode, image, single_process=single_process),
        network_policy(namespace),
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": metadata(APP_NAME, namespace),
            # The webhook's pods only: pod creation fails while none answers. A drain
            # that takes both controller pods only delays releases until one is back.
            "spec": {
                "minAvailable": 1,
                "selector": {"matchLabels": {"app.kubernetes.io/name": APP_NAME}},
            },
        },
        *webhook_configurations(
            namespace, ca_bundle=encoded, cert_mode=cert_mode, gpu_resources=gpu_resources
        ),
    ]
    return objects
