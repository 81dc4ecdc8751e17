"""The one request that lifts gangkeeper's gate from a pod, for the controller's
bursts and for `gangkeeper ungate` alike: a JSON patch that removes the gate, pins
the pod to its node when the plan placed it, stamps the release time and adds a
provisioned request's annotations (`writes.ungate_patch`), guarded by a test of the
resourceVersion read (`fencing.guarded`), so a pod changed meanwhile is not
patched.

May PATCH one pod through the Api it is given; retries, counting and fencing are the
caller's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangkeeper.policies.cluster.observed_gangs import PodInfo

from ..kube.api import Api
from ..kube.resources import PODS
from .fencing import guarded
from .writes import WRITE_QUERY, ungate_patch


def lift_gate(
    api: Api,
    pod: PodInfo,
    node: str | None,
    wall: float | None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Send the patch (`wall`: the release time stamped with a pin; None: none); the
    pod as the API server has it after. Raises `ApiError` (422
    when the pod changed since it was read, 404 when it is gone)."""
    return api.request(
        "PATCH", PODS.object_path(pod.namespace, pod.name), WRITE_QUERY,
        body=guarded(ungate_patch(pod, node, wall, annotations), pod.resource_version),
        content_type="application/json-patch+json",
    )
