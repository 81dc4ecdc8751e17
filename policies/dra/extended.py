"""DRA device classes seen as extended resources, so the existing packing checks them.

A DeviceClass offering N devices on a node becomes an allocatable of N of the
resource `dra:<class>` on that Node and, on a node whose allocatable lists none of it,
N of the class's `extendedResourceName` (`DeviceClassSpec.extendedResourceName`,
k8s.io/api/resource/v1/types.go): there the scheduler serves pods asking for that
resource from the class's devices. Both names offer the same devices, so a gang
mixing the two forms is counted generously (admitted where it may not fit), never
refused for it. A pod's claims (`claims.pod_claims`) become limits of the same names
on its first container, so `podspec.pod_demand` and the feasibility/packing count them
as GPUs with no DRA knowledge of their own; the names are added to the config's
`gpuResources` for that.

Where a count is UNKNOWN (cluster/capacity.py) the node gets `UNCOUNTED` devices: nothing is
refused on its account. An All request asks for the fewest devices any node offers the
class (at least one): it takes the whole node, which is not charged. Shared
ResourceClaims are left out here (each pod would be charged the whole claim; the
gang-level count, `claims.shared_demand`, is not wired into the packing yet).

A pod naming a ResourceClaimTemplate that was not given is an `InvalidObject` at
that entry: its devices cannot be counted, and a pod seen as asking none would pass.

Pure: returns new dicts, never changes those given.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import InvalidObject
from ..podspec import field_path
from ..quantity import MAX_GPUS_PER_POD
from ..settings.config import Config
from .claims import DeviceDemand, pod_claims
from .class_capacity import UNKNOWN, class_capacity
from .classes import DeviceClass
from .slices import ResourceSlice, node_devices

#: Devices of a class on a node whose count is unknown: more than any pod may ask.
UNCOUNTED = MAX_GPUS_PER_POD
PREFIX = "dra:"


def _labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, Mapping) else {}


def nodes_with_devices(
    nodes: Iterable[Mapping[str, Any]],
    slices: Iterable[ResourceSlice],
    classes: Iterable[DeviceClass],
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(Nodes with their classes' devices in `status.allocatable`, the fewest devices
    of each class a node offers, for All requests)."""
    held_slices, held_classes = list(slices), list(classes)
    out: list[dict[str, Any]] = []
    fewest: dict[str, int] = {}
    for node in nodes:
        copied = copy.deepcopy(dict(node))
        name = str((copied.get("metadata") or {}).get("name", ""))
        status = copied.setdefault("status", {})
        allocatable = status.setdefault("allocatable", {})
        devices = node_devices(held_slices, name, _labels(copied))
        for device_class in held_classes:
            counted = class_capacity(device_class, devices)
            if counted == 0:
                continue
            amount = UNCOUNTED if counted is UNKNOWN else counted
            extended = device_class.extended_resource_name
            if extended and extended not in allocatable:
                allocatable[extended] = str(amount)
            allocatable[PREFIX + device_class.name] = str(amount)
            if counted is not UNKNOWN:
                fewest[device_class.name] = min(fewest.get(device_class.name, amount), amount)
        out.append(copied)
    return out, fewest


def with_device_resources(config: Config, classes: Iterable[DeviceClass]) -> Config:
    """The config counting the classes' resources as GPUs."""
    names = [PREFIX + c.name for c in classes]
    names += [c.extended_resource_name for c in classes if c.extended_resource_name]
    added = tuple(n for n in dict.fromkeys(names) if not config.is_gpu_resource(n))
    return dataclasses.replace(config, gpu_resources=(*config.gpu_resources, *added))


def _limits(demand: DeviceDemand, fewest: Mapping[str, int]) -> dict[str, str]:
    limits: dict[str, int] = {}
    for class_name, count in demand.counts.items():
        limits[PREFIX + class_name] = count
    for class_name in demand.every:
        limits[PREFIX + class_name] = limits.get(PREFIX + class_name, 0) + fewest.get(
            class_name, 1
        )
    return {k: str(v) for k, v in limits.items()}


def with_claim_limits(
    obj: Mapping[str, Any],
    templates: Mapping[str, DeviceDemand],
    fewest: Mapping[str, int],
) -> dict[str, Any]:
    """`obj` with every pod spec in it (a mapping with `containers` and
    `resourceClaims`) asking its claims' devices in its first container's limits."""

    def walk(value: Any, path: str) -> Any:
        if isinstance(value, list):
            return [walk(v, f"{path}[{i}]") for i, v in enumerate(value)]
        if not isinstance(value, Mapping):
            return value
        out = {k: walk(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
        containers = out.get("containers")
        if out.get("resourceClaims") and isinstance(containers, list) and containers:
            claims = pod_claims(out, templates, path or "spec")
            if claims.unresolved:
                # Its devices cannot be counted: refuse to judge rather than see a pod
                # that asks no GPUs (as a TrainJob without its runtime is refused).
                _raise_unresolved(out["resourceClaims"], sorted(claims.unresolved)[0],
                                  field_path(path or "spec", "resourceClaims"))
            extra = _limits(claims.own, fewest)
            if extra and isinstance(containers[0], dict):
                resources = containers[0].setdefault("resources", {})
                limits = resources.setdefault("limits", {})
                limits.update(extra)
        return out

    result: dict[str, Any] = walk(obj, "")
    return result


def _raise_unresolved(entries: list[Any], template: str, path: str) -> None:
    """InvalidObject at the claim entry that names `template`, which was not given."""
    index = next(i for i, e in enumerate(entries)
                 if isinstance(e, Mapping) and e.get("resourceClaimTemplateName") == template)
    raise InvalidObject(field_path(field_path(path, index), "resourceClaimTemplateName"),
                        f"ResourceClaimTemplate {template!r} not found")
