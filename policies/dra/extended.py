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
refused on its account. An All request takes every device of its class on the node it
lands on: it asks the fewest devices any node offers the class (at least one) and one
`dra:<class>/all` (`resource_names.whole_name`), of which every node offering the class
has one (`UNCOUNTED` where the count is unknown), so N such members need N nodes; on a
node where claims hold devices of the class the whole node is held too
(`assigner.whole_nodes` ties it to the devices' use by pods). A shared
ResourceClaim (given in `shared`) becomes a limit of its own name, `dra:<class>@<claim>`,
that `shared.charged_once` turns into one member's devices for the whole gang; one not
given, or with `shared` None (the controller, which counts allocated claims on their
nodes instead), is left out: its devices are not counted.

A request narrowing its class with selectors of its own asks `dra:<class>#<hash>`
(`claims.narrowed_key`) beside `dra:<class>`; a node offers as many of it as devices
the class's and the request's selectors both accept (`nodes_with_devices(narrowed=)`;
UNCOUNTED where one cannot be decided), so the nodes must be counted for every such key
the pods may ask (`counted`: keys they were not counted for are asked as their class).

A pod naming a ResourceClaimTemplate that was not given is an `InvalidObject` at
that entry: its devices cannot be counted, and a pod seen as asking none would pass.

Pure: never changes the dicts given; what it returns shares their unchanged parts.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Container, Iterable, Mapping
from typing import Any

from ..errors import InvalidObject
from ..model import HELD_BY_CLAIMS, JSON_OBJECT
from ..podspec import field_path
from ..quantity import MAX_GPUS_PER_POD
from ..settings.config import Config, NodePool
from .allocated import DeviceKey
from .claims import DeviceDemand, class_of, pod_claims
from .class_capacity import UNKNOWN, class_capacity
from .classes import DeviceClass, SelectorVerdict, selects
from .resource_names import NARROWED, PREFIX, WHOLE, shared_name, whole_name
from .slices import Device, ResourceSlice, node_devices, pool_states

#: What `with_claim_limits` looks into for pod specs (a dict first: a C type check).
_NESTED = (dict, list, Mapping)
#: Keys under which no pod spec is ever found.
_NO_POD_SPEC = frozenset({"metadata", "status"})
#: Devices of a class on a node whose count is unknown: more than any pod may ask.
UNCOUNTED = MAX_GPUS_PER_POD
__all__ = ["PREFIX", "UNCOUNTED", "claim_limits", "fewest_with_pools", "nodes_with_devices",
           "with_claim_limits", "with_device_resources"]


def _labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, Mapping) else {}


def nodes_with_devices(
    nodes: Iterable[Mapping[str, Any]],
    slices: Iterable[ResourceSlice],
    classes: Iterable[DeviceClass],
    held: frozenset[DeviceKey] = frozenset(),
    narrowed: Mapping[str, tuple[str, tuple[str, ...]]] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(Nodes with their classes' devices in `status.allocatable`, the fewest devices
    of each class a node offers, for All requests). The `held` devices (`allocated`)
    a class counts on a node are in the Node's `status` under `HELD_BY_CLAIMS`.
    `narrowed` (`DeviceDemand.narrowed`: key -> class, a request's selectors) adds
    `dra:<key>`: the devices both the class's and the request's selectors accept (a
    key of a class not given offers nothing)."""
    by_name = {c.name: c for c in classes}
    # A narrowed key counts as a class whose selectors are its class's and the request's.
    held_classes = [*by_name.values(), *(
        DeviceClass(key, (*by_name[name].selectors, *expressions))
        for key, (name, expressions) in sorted((narrowed or {}).items()) if name in by_name)]
    # A slice naming its node is offered to that node alone: only the others are
    # looked at for every node (O(nodes + slices), not nodes x slices).
    named: dict[str, list[ResourceSlice]] = {}
    anywhere: list[ResourceSlice] = []
    for piece in slices:
        if piece.selection is not None and piece.selection.node_name and not piece.shared_counters:
            named.setdefault(piece.selection.node_name, []).append(piece)
        else:
            anywhere.append(piece)
    # Pools are judged over every slice (a pool may span nodes: `slices` docstring).
    states = pool_states([*anywhere, *(p for pieces in named.values() for p in pieces)])
    out: list[dict[str, Any]] = []
    fewest: dict[str, int] = {}
    for node in nodes:
        copied = copy.deepcopy(dict(node))
        name = str((copied.get("metadata") or {}).get("name", ""))
        status = copied.setdefault("status", {})
        allocatable = status.setdefault("allocatable", {})
        devices = node_devices([*named.get(name, ()), *anywhere], name, _labels(copied), states)
        for device_class in held_classes:
            counted = class_capacity(device_class, devices)
            if counted == 0:
                continue
            amount = UNCOUNTED if counted is UNKNOWN else counted
            extended = device_class.extended_resource_name  # "" for a narrowed key
            serves_extended = bool(extended) and extended not in allocatable
            if serves_extended:
                allocatable[extended] = str(amount)
            allocatable[PREFIX + device_class.name] = str(amount)
            allocatable[whole_name(device_class.name)] = str(UNCOUNTED if counted is UNKNOWN
                                                              else 1)
            if counted is UNKNOWN:
                continue
            fewest[device_class.name] = min(fewest.get(device_class.name, amount), amount)
            taken = _held(device_class, devices, held) if held else 0
            if taken:
                held_here = status.setdefault(HELD_BY_CLAIMS, {})
                # Not the whole node as well: `assigner.whole_nodes` ties it to these, and
                # a held whole node would make every device of the class look taken.
                held_here[PREFIX + device_class.name] = taken
                if serves_extended:
                    held_here[extended] = taken
        out.append(copied)
    return out, fewest


def fewest_with_pools(fewest: Mapping[str, int], pools: Iterable[NodePool]) -> dict[str, int]:
    """`fewest` (what an All request asks of a class) lowered to what a declared pool's
    nodes will offer (`pools[].devices`): an All member must fit a pool node too, or a
    gang waiting for a pool of smaller nodes is refused as if it could never run."""
    out = dict(fewest)
    for pool in pools:
        for name, count in pool.devices.items():
            out[name] = min(out.get(name, count), count)
    return out


def _held(device_class: DeviceClass, devices: list[Device], held: frozenset[DeviceKey]) -> int:
    """How many of a node's devices of the class are held by claims."""
    return sum(
        (d.driver, d.pool, d.name) in held and selects(device_class, d) is SelectorVerdict.ACCEPTED
        for d in devices
    )  # fmt: skip


def with_device_resources(config: Config, classes: Iterable[DeviceClass]) -> Config:
    """The config counting the classes' resources (and shared claims' devices) as GPUs."""
    names = [n for c in classes for n in (PREFIX + c.name, shared_name(c.name, "*"),
                                          whole_name(c.name), shared_name(c.name + WHOLE, "*"),
                                          f"{PREFIX}{c.name}{NARROWED}*")]
    names += [c.extended_resource_name for c in classes if c.extended_resource_name]
    added = tuple(n for n in dict.fromkeys(names) if not config.is_gpu_resource(n))
    return dataclasses.replace(config, gpu_resources=(*config.gpu_resources, *added))


def _limits(demand: DeviceDemand, fewest: Mapping[str, int], claim: str = "",
            counted: Container[str] | None = None) -> dict[str, int]:
    """`demand` as limits of `dra:<class>` (and `dra:<class>/all` for All), or of
    `claim`'s own names when it is shared. A narrowed key (`claims.narrowed_key`) is
    asked under its own name and its class's; where the nodes were not counted for it
    (not in `counted`, None: all were), under its class's only, as before it was known."""

    def name(key: str) -> str:
        return shared_name(key, claim) if claim else PREFIX + key

    def add(key: str, amount: int) -> None:
        limits[name(key)] = limits.get(name(key), 0) + amount

    limits: dict[str, int] = {}
    for key, count in demand.counts.items():
        if NARROWED in key:
            add(class_of(key), count)
            if counted is not None and key not in counted:
                continue
        add(key, count)
    for key in sorted(demand.every):
        if NARROWED in key:
            if counted is not None and key not in counted:
                # One device of its class, a lower bound: not the class's fewest (the
                # selectors may leave most of a node's devices to other requests of
                # the pod), nor the class's whole node (other devices of the class in
                # use would keep it from now).
                add(class_of(key), 1)
                continue
            add(class_of(key), fewest.get(key, 1))
        add(key, fewest.get(key, 1))
        limits[name(key + WHOLE)] = 1  # one whole node, however many All requests
    return limits


def claim_limits(demand: DeviceDemand, fewest: Mapping[str, int],
                 counted: Container[str] | None = None) -> dict[str, int]:
    """A claim's `demand` as limits of `dra:<class>` (`_limits`): what the pods sharing
    an unallocated claim ask once, together, on the node they are pinned to."""
    return _limits(demand, fewest, counted=counted)


def with_claim_limits(
    obj: Mapping[str, Any],
    templates: Mapping[str, DeviceDemand],
    fewest: Mapping[str, int],
    shared: Mapping[str, DeviceDemand] | None = None,
    counted: Container[str] | None = None,
) -> dict[str, Any]:
    """`obj` with every pod spec in it (a mapping with `containers` and
    `resourceClaims`) asking its claims' devices in its first container's limits:
    its templates' as `dra:<class>`, the `shared` claims it names under their own
    names (module docstring)."""

    def walk(value: Any, path: str) -> Any:
        # Only what changes is copied: the rest is shared with `obj` (never changed).
        if isinstance(value, list):
            items = [walk(v, f"{path}[{i}]") for i, v in enumerate(value)]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        if not isinstance(value, JSON_OBJECT):
            return value
        containers = value.get("containers")
        if containers is None:
            # Not a pod spec: one may be inside (a template), never in metadata or status.
            out: dict[str, Any] | None = None
            for k, v in value.items():
                if isinstance(v, _NESTED) and k not in _NO_POD_SPEC:
                    walked = walk(v, f"{path}.{k}" if path else str(k))
                    if walked is not v:
                        out = dict(value) if out is None else out
                        out[k] = walked
            return value if out is None else out
        if value.get("resourceClaims") and isinstance(containers, list) and containers:
            claims = pod_claims(value, templates, path or "spec")
            if claims.unresolved:
                # Its devices cannot be counted: refuse to judge rather than see a pod
                # that asks no GPUs (as a TrainJob without its runtime is refused).
                _raise_unresolved(value["resourceClaims"], sorted(claims.unresolved)[0],
                                  field_path(path or "spec", "resourceClaims"))
            extra = _limits(claims.own, fewest, counted=counted)
            for name in sorted(claims.shared):
                if shared is not None and name in shared:
                    extra.update(_limits(shared[name], fewest, name, counted))
            if extra and isinstance(containers[0], JSON_OBJECT):
                return {**value,
                        "containers": [_with_limits(containers[0], extra), *containers[1:]]}
        return value

    result: dict[str, Any] = dict(walk(obj, ""))
    return result


def _with_limits(container: Mapping[str, Any], extra: Mapping[str, int]) -> dict[str, Any]:
    """A copy of `container` with `extra` added to its limits."""
    resources = dict(container.get("resources") or {})
    resources["limits"] = {**(resources.get("limits") or {}),
                           **{k: str(v) for k, v in extra.items()}}
    return {**container, "resources": resources}


def _raise_unresolved(entries: list[Any], template: str, path: str) -> None:
    """InvalidObject at the claim entry that names `template`, which was not given."""
    index = next(i for i, e in enumerate(entries)
                 if isinstance(e, Mapping) and e.get("resourceClaimTemplateName") == template)
    raise InvalidObject(field_path(field_path(path, index), "resourceClaimTemplateName"),
                        f"ResourceClaimTemplate {template!r} not found")
