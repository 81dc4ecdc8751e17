"""Pod constraints the assigner does not model, read from a pod spec (a plain dict).

A pin is a promise that the scheduler can bind the member on that node. The assigner
checks node eligibility (nodeSelector, required node affinity, taints) and resources;
it does not check constraints between pods or on volumes:

- required pod affinity / anti-affinity (JobSet and LeaderWorkerSet exclusive
  topology inject it): depends on where other pods run;
- topology spread with `whenUnsatisfiable: DoNotSchedule`: depends on the spread;
- `hostPort`: two pods on one node may collide;
- PersistentVolumeClaims and generic ephemeral volumes: a zonal volume binds a node;
- DRA `resourceClaims`, unless the caller counted their devices as the pod's requests
  (`dra:<class>`, `webhook.kube.device_view`) and says whether a count can place them
  (`claims`: `policies.dra.pinnable.pinning`, "" when it can).

A member with any of them makes its gang go unpinned (the scheduler places it), with
the reason `unmodeled` returns. Soft preferences never matter here.

Pure: reads a dict, returns a sentence ("" when nothing unmodeled is present).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _items(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def unmodeled(spec: object, claims: str | None = None) -> str:
    """Why this pod cannot be pinned safely, or "" when it can.

    `claims`: why its DRA claims cannot be placed by their devices' count ("" when
    they can); None when their devices were not counted at all."""
    body = _mapping(spec)
    affinity = _mapping(body.get("affinity"))
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = _mapping(affinity.get(kind)).get("requiredDuringSchedulingIgnoredDuringExecution")
        if terms:
            return f"required {kind} (placement depends on other pods)"
    for spread in _items(body.get("topologySpreadConstraints")):
        if spread.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule":
            return "a DoNotSchedule topologySpreadConstraint"
    for group in ("initContainers", "containers"):
        for container in _items(body.get(group)):
            if any(port.get("hostPort") for port in _items(container.get("ports"))):
                return "a hostPort"
    for volume in _items(body.get("volumes")):
        if "persistentVolumeClaim" in volume or "ephemeral" in volume:
            return f"volume {volume.get('name', '?')!s} (a claim may bind the pod to a zone)"
    if body.get("resourceClaims"):
        return "DRA resourceClaims whose devices are not counted" if claims is None else claims
    return ""
