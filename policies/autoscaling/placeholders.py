"""The placeholder pod that holds room for one gang member while nodes are added.

`placeholder_pod(member, gang_label, settings, owner)` copies what makes the
autoscaler choose the right node and the scheduler put it where the member may go:
the member's effective requests (every resource, computed as kube-scheduler does:
the larger of app containers plus sidecars and the peak init container, plus
overhead), nodeSelector, required node affinity, tolerations, topology spread
constraints and schedulerName, and its DRA claims made from ResourceClaimTemplates
(`spec.resourceClaims[].resourceClaimTemplateName`: templates are namespaced and
reusable, so the placeholder gets claims of its own for the same devices, made by the
resourceclaim controller and deleted with it). It leaves out what could never be
satisfied by a pod that is not a member: required pod (anti-)affinity names the
members' labels, which a placeholder does not carry, so copying it could make the
placeholder unschedulable (or repel the members themselves); and a shared
ResourceClaim (`resourceClaimName`), which the placeholder would reserve, and whose
allocation, once made for the placeholder, would hold the devices on the
placeholder's node for every pod that shares the claim.

Pure: a pod dict in, a pod dict out.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from .. import names
from ..errors import InvalidObject
from ..quantity import parse_quantity
from ..settings.autoscaling import Autoscaling

#: Suffix of a placeholder's name: `<member>-gkp` (deterministic, so a restarted
#: controller finds the placeholders it made, and a create is idempotent).
SUFFIX = "-gkp"
#: Pod names are DNS subdomains (≤ 253); long member names are cut and hashed.
_MAX_NAME = 253


def placeholder_name(member_name: str) -> str:
    """The placeholder's name for a member: stable across controller restarts."""
    name = f"{member_name}{SUFFIX}"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(member_name.encode()).hexdigest()[:10]
    return f"{member_name[: _MAX_NAME - len(SUFFIX) - 11]}-{digest}{SUFFIX}"


def _requests(container: Mapping[str, Any]) -> dict[str, Fraction]:
    resources = container.get("resources") or {}
    # As the API server defaults them: limits stand in for missing requests.
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    out: dict[str, Fraction] = {}
    for resource, value in merged.items():
        try:
            out[str(resource)] = parse_quantity(value, f"resources[{resource!r}]")
        except InvalidObject:
            continue  # the member itself was admitted with it; nothing to hold for it
    return out


def _add(into: dict[str, Fraction], other: Mapping[str, Fraction]) -> None:
    for key, value in other.items():
        into[key] = into.get(key, Fraction(0)) + value


def effective_requests(spec: Mapping[str, Any]) -> dict[str, Fraction]:
    """Every resource the scheduler charges the pod for (k8s resource.PodRequests)."""
    running: dict[str, Fraction] = {}
    for container in spec.get("containers") or []:
        if isinstance(container, Mapping):
            _add(running, _requests(container))
    peak: dict[str, Fraction] = {}
    sidecars: dict[str, Fraction] = {}
    for container in spec.get("initContainers") or []:
        if not isinstance(container, Mapping):
            continue
        own = _requests(container)
        if container.get("restartPolicy") == "Always":
            _add(sidecars, own)
            _add(running, own)
            continue
        # An ordinary init container runs beside the sidecars started before it.
        total = dict(own)
        _add(total, sidecars)
        for key, value in total.items():
            peak[key] = max(peak.get(key, Fraction(0)), value)
    effective = dict(running)
    for key, value in peak.items():
        effective[key] = max(effective.get(key, Fraction(0)), value)
    overhead: dict[str, Fraction] = {}
    for resource, value in (spec.get("overhead") or {}).items():
        try:
            overhead[str(resource)] = parse_quantity(value, f"overhead[{resource!r}]")
        except InvalidObject:
            continue
    _add(effective, overhead)
    return {k: v for k, v in effective.items() if v > 0}


def quantity_text(resource: str, value: Fraction) -> str:
    """A quantity the API server accepts, never below `value` (rounded up)."""
    if resource == "cpu" or value.denominator != 1:
        milli = math.ceil(value * 1000)
        return f"{milli // 1000}" if milli % 1000 == 0 else f"{milli}m"
    return str(value.numerator)


def _required_node_affinity(spec: Mapping[str, Any]) -> dict[str, Any] | None:
    affinity = spec.get("affinity") or {}
    node = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = (
        node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node, Mapping)
        else None
    )
    if not required:
        return None
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


def placeholder_pod(
    member: Mapping[str, Any],
    gang_label: str,
    settings: Autoscaling,
    owner: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The placeholder for `member` (a pod dict as the API server returns it)."""
    meta = member.get("metadata") or {}
    spec = member.get("spec") or {}
    member_name = str(meta.get("name", ""))
    requests = {r: quantity_text(r, v) for r, v in sorted(effective_requests(spec).items())}
    pod_spec: dict[str, Any] = {
        "containers": [
            {
                "name": "placeholder",
                "image": settings.image,
                # Limits equal to requests for the extended resources (GPUs), which
                # must have both; cpu and memory only request.
                "resources": {
                    "requests": requests,
                    "limits": {r: q for r, q in requests.items() if "/" in r},
                },
            }
        ],
        "priorityClassName": settings.priority_class,
        # Never evict anything to make room: placeholders only ask for new nodes.
        "preemptionPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
    }
    for key in ("nodeSelector", "tolerations", "topologySpreadConstraints", "schedulerName"):
        if spec.get(key):
            pod_spec[key] = spec[key]
    affinity = _required_node_affinity(spec)
    if affinity is not None:
        pod_spec["affinity"] = affinity
    claims = [
        {"name": c["name"], "resourceClaimTemplateName": c["resourceClaimTemplateName"]}
        for c in spec.get("resourceClaims") or []
        if isinstance(c, Mapping) and c.get("name") and c.get("resourceClaimTemplateName")
    ]
    if claims:
        # Allocated to the pod as a whole: no container needs to name them.
        pod_spec["resourceClaims"] = claims
    metadata: dict[str, Any] = {
        "name": placeholder_name(member_name),
        "namespace": str(meta.get("namespace", "")),
        "labels": {
            names.PLACEHOLDER_LABEL: gang_label,
            names.SKIP_LABEL: "true",
            names.MANAGED_BY_LABEL: names.MANAGED_BY,
        },
        "annotations": {
            names.PLACEHOLDER_MEMBER_ANNOTATION: member_name,
            names.KARPENTER_DO_NOT_DISRUPT: "true",
        },
    }
    if owner is not None:
        # Garbage-collected with the gang's workload; `controller: false` so that no
        # controller (Job, JobSet, ...) ever counts it as one of its pods.
        metadata["ownerReferences"] = [{**owner, "controller": False, "blockOwnerDeletion": False}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
