"""Devices that allocated ResourceClaims hold: not free now, whatever pods run.

`ResourceClaimStatus.allocation` (`AllocationResult`, k8s.io/api/resource/v1/types.go)
lists in `devices.results[]` (`DeviceRequestAllocationResult`) each allocated device by
`driver`, `pool` and `device`. Such a device is taken until the claim is deallocated,
whether or not a pod using the claim is running (a claim allocated ahead of its pods, a
shared claim between two jobs that use it, a claim whose pods are gone).

Which claims count here, so that no device is counted twice:
- a claim made from a ResourceClaimTemplate for one pod (an `ownerReference` to a Pod
  that is its controller) does not: its pod asks the devices as limits, and the
  controller counts a bound pod's limits on its node. Between the allocation and the
  binding (the scheduler's PreBind) its devices look free for a moment;
- a shared ResourceClaim (no Pod owns it) does: pods name it but do not ask it as
  limits in the controller (`extended.with_claim_limits` with `shared` None);
- a result with `adminAccess: true` takes nothing away from other claims.

Where the pods sharing an allocated claim must run (`allocated_node`) is read from its
`allocation.nodeSelector`: the release pins them there.

Pure: plain dicts in, frozen sets and names out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..podspec import as_list, as_mapping, as_str, field_path

#: (driver, pool, device): a device as results and slices name it.
DeviceKey = tuple[str, str, str]


def _owned_by_a_pod(meta: Mapping[str, Any]) -> bool:
    return any(
        isinstance(ref, Mapping) and ref.get("kind") == "Pod" and ref.get("controller") is True
        and ref.get("apiVersion") == "v1"
        for ref in meta.get("ownerReferences") or ()
    )  # fmt: skip


def held_devices(obj: Mapping[str, Any]) -> frozenset[DeviceKey]:
    """The devices a ResourceClaim holds that no pod's limits count (module docstring);
    InvalidObject naming the claim and field when its allocation is malformed."""
    meta = as_mapping(obj.get("metadata"), "metadata")
    name = as_str(meta.get("name"), "metadata.name", default="?")
    if _owned_by_a_pod(meta):
        return frozenset()
    status_path = f"ResourceClaim {name}: status"
    status = as_mapping(obj.get("status"), status_path)
    allocation_path = field_path(status_path, "allocation")
    devices_path = field_path(allocation_path, "devices")
    results_path = field_path(devices_path, "results")
    allocation = as_mapping(status.get("allocation"), allocation_path)
    results = as_list(as_mapping(allocation.get("devices"), devices_path).get("results"),
                      results_path)  # fmt: skip
    held: set[DeviceKey] = set()
    for i, raw in enumerate(results):
        path = field_path(results_path, i)
        result = as_mapping(raw, path, required=True)
        if result.get("adminAccess") is True:
            continue
        driver, pool, device = (as_str(result.get(k), field_path(path, k))
                                for k in ("driver", "pool", "device"))
        held.add((driver, pool, device))
    return frozenset(held)


def allocated_node(obj: Mapping[str, Any]) -> str | None:
    """Where an allocated ResourceClaim's pods must run, when its allocation names one
    node (`status.allocation.nodeSelector`: one term whose only requirement is
    `metadata.name In [<node>]`, as the allocator writes it for devices of one node's
    slices): that node; "" while it is not allocated; None when it is allocated
    anywhere else (devices several nodes reach, or no selector at all)."""
    status = obj.get("status")
    allocation = status.get("allocation") if isinstance(status, Mapping) else None
    if not isinstance(allocation, Mapping):
        return ""
    selector = allocation.get("nodeSelector")
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, Mapping) else None
    if not isinstance(terms, list) or len(terms) != 1 or not isinstance(terms[0], Mapping):
        return None
    term = terms[0]
    fields = term.get("matchFields")
    if term.get("matchExpressions") or not isinstance(fields, list) or len(fields) != 1:
        return None
    (field,) = fields
    values = field.get("values") if isinstance(field, Mapping) else None
    if (not isinstance(field, Mapping) or field.get("key") != "metadata.name"
            or field.get("operator") != "In" or not isinstance(values, list)
            or len(values) != 1 or not isinstance(values[0], str)):
        return None
    return values[0]
