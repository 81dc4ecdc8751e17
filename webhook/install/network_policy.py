"""The NetworkPolicy of gangkeeper's pods: only webhook and metrics traffic comes in.

It selects the pods of both Deployments (webhook and controller: `part-of`). The API
server's webhook calls (webhook pods), Prometheus scrapes of /metrics and the kubelet's
probes (both) all reach the one HTTPS port; nothing else is served, so every other port is closed.
Where calls come from cannot be named portably (the API server's address is not a pod
or a namespace on most clusters), so the port is the bound. Egress is not restricted:
the only peer is the API server, whose address and port differ per cluster, and a wrong
egress rule would stop the controller without a visible error.

Pure: builds a dict.
"""

from __future__ import annotations

from gangkeeper.policies.names import APP_NAME

from .deployment import CONTAINER_PORT
from .objects import Manifest, metadata


def network_policy(namespace: str) -> Manifest:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(APP_NAME, namespace),
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/part-of": APP_NAME}},
            "policyTypes": ["Ingress"],
            # Admission (/mutate, /validate) and /metrics share this port.
            "ingress": [{"ports": [{"protocol": "TCP", "port": CONTAINER_PORT}]}],
        },
    }
