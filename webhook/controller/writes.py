"""The bodies of the controller's writes, built from plain values: gate-removal JSON
patches, Events, the suspend/resume patches of a requeue, the DeleteOptions of every
delete (a uid precondition), the field manager every write names.

Pure (no I/O): the controller's loops send what these return.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from gangkeeper.policies.assigner import pin_patch
from gangkeeper.policies.assigner.pin import pointer_token
from gangkeeper.policies.catalogue import event_reason
from gangkeeper.policies.cluster.observed_gangs import PodInfo
from gangkeeper.policies.names import (
    EVENT_SOURCE,
    FIELD_MANAGER,
    GATE,
    REQUEUE_LABEL,
    REQUEUE_SUSPENDED,
    REQUEUES_ANNOTATION,
)

from ..kube.election import micro_time

#: Every write names gangkeeper as its field manager (managedFields say who wrote what).
WRITE_QUERY = (("fieldManager", FIELD_MANAGER),)


def delete_options(
    uid: str, grace_seconds: int | None = None, resource_version: str = ""
) -> dict[str, Any] | None:
    """DeleteOptions that delete the object read and no other: a precondition on its uid
    (a newer object of that name answers 409), and with `resource_version` on the
    version read (the object changed since answers 409 too); None without a uid."""
    if not uid:
        return None
    preconditions = {"uid": uid}
    if resource_version:
        preconditions["resourceVersion"] = resource_version
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions",
                            "preconditions": preconditions}
    if grace_seconds is not None:
        body["gracePeriodSeconds"] = grace_seconds
    return body


def gate_removal_patch(gates: Sequence[str], gate: str = GATE) -> list[dict[str, Any]]:
    """JSON patch lifting only `gate`, guarded by a test of the gates read."""
    current = [{"name": g} for g in gates]
    remaining = [{"name": g} for g in gates if g != gate]
    return [
        {"op": "test", "path": "/spec/schedulingGates", "value": current},
        {"op": "replace", "path": "/spec/schedulingGates", "value": remaining},
    ]


def ungate_patch(
    pod: PodInfo,
    node: str | None = None,
    wall: float | None = None,
    annotations: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """JSON patch lifting only gangkeeper's gate from `pod`, pinning it to `node` when
    one is given (`assigner.pin.pin_patch`), and recording the release time (`wall`,
    epoch seconds) for the watchdog. `annotations` (a provisioned ProvisioningRequest's
    consume keys) are added in the same patch, before the gate goes (gang pods always
    have annotations)."""
    if not node:
        patch = gate_removal_patch(pod.gates)
    else:
        stamp = rfc3339(wall) if wall is not None else None
        patch = pin_patch(pod.gates, pod.placement, pod.affinity_levels, node,
                          released_at=stamp)
    added = [
        {"op": "add", "path": f"/metadata/annotations/{pointer_token(key)}", "value": value}
        for key, value in sorted((annotations or {}).items())
    ]
    # After the gate list's `test`, before the gates are replaced: one atomic patch.
    return [patch[0], *added, *patch[1:]]


def rfc3339(wall: float) -> str:
    """Epoch seconds as the API server writes times (UTC, whole seconds, Z)."""
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(
    regarding: Mapping[str, str], reason: str, note: str, identity: str, wall: float
) -> dict[str, Any]:
    """An events.k8s.io/v1 Event about `regarding`, of the type the catalogue gives
    `reason` (ValueError for a reason it does not declare)."""
    kind = event_reason(reason).type
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "generateName": f"{regarding['name'][:200]}.gangkeeper-",
            "namespace": regarding["namespace"],
        },
        "eventTime": micro_time(wall),
        "reportingController": EVENT_SOURCE,
        "reportingInstance": identity[:128],
        "action": "Release",
        "reason": reason,
        "note": note[:1024],
        "type": kind,
        "regarding": dict(regarding),
    }


def suspend_patch(owner: Mapping[str, Any], requeues: int) -> list[dict[str, Any]]:
    """JSON patch suspending the owner (a Job, JobSet or TrainJob) as read (`test`s its
    uid and resourceVersion, so one changed or replaced meanwhile fails it), labelled
    for any leader to resume it, with its requeue count."""
    meta = owner.get("metadata") or {}
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
    ]
    for field, key, value in (
        ("labels", REQUEUE_LABEL, REQUEUE_SUSPENDED),
        ("annotations", REQUEUES_ANNOTATION, str(requeues)),
    ):
        if meta.get(field):
            path = f"/metadata/{field}/{pointer_token(key)}"
            ops.append({"op": "add", "path": path, "value": value})
        else:
            ops.append({"op": "add", "path": f"/metadata/{field}", "value": {key: value}})
    ops.append({"op": "add", "path": "/spec/suspend", "value": True})
    return ops


def resume_patch(owner: Mapping[str, Any]) -> list[dict[str, Any]]:
    """JSON patch resuming an owner gangkeeper suspended (its label says so) and removing
    the label; `test`s uid and label, so one suspended by someone else is left alone."""
    uid = (owner.get("metadata") or {}).get("uid")
    label = f"/metadata/labels/{pointer_token(REQUEUE_LABEL)}"
    return [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": label, "value": REQUEUE_SUSPENDED},
        {"op": "remove", "path": label},
        {"op": "add", "path": "/spec/suspend", "value": False},
    ]
