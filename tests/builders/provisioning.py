"""ProvisioningRequests as cluster-autoscaler leaves them, for tests: gangkeeper's labels,
an owner, and the status conditions a test decides (cluster-autoscaler is not run)."""

from __future__ import annotations

from typing import Any

from builders.gangs import stamp
from gangkeeper.policies.names import MANAGED_BY, MANAGED_BY_LABEL, PROVISIONING_LABEL

OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid"}
BEST_EFFORT = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"


def condition(
    kind: str, status: str = "True", *, at: float, reason: str = "", message: str = ""
) -> dict[str, Any]:
    """A metav1.Condition as the CRD requires it (reason and message are required)."""
    return {
        "type": kind,
        "status": status,
        "reason": reason or f"{kind}Reason",
        "message": message or f"{kind} by the test",
        "lastTransitionTime": stamp(at),
    }


def provisioning_request(
    gang: str,
    attempt: int = 1,
    *,
    conditions: list[dict[str, Any]] | None = None,
    owner_uid: str = "job-uid",
    namespace: str = "team",
    class_name: str = BEST_EFFORT,
) -> dict[str, Any]:
    name = f"{gang}-gkpr-{attempt}"
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-pr-{name}-{owner_uid}",
        "resourceVersion": "1",
        "labels": {PROVISIONING_LABEL: gang, MANAGED_BY_LABEL: MANAGED_BY},
    }
    if owner_uid:
        metadata["ownerReferences"] = [{**OWNER, "uid": owner_uid, "controller": False}]
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": metadata,
        "spec": {"provisioningClassName": class_name,
                 "podSets": [{"podTemplateRef": {"name": f"{name}-0"}, "count": 1}]},
        "status": {"conditions": conditions or []},
    }
