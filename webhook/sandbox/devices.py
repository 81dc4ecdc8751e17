"""DRA devices of the sandbox's kwok nodes: ResourceSlices and DeviceClasses.

On a real cluster a DRA driver's kubelet plugin publishes one ResourceSlice per node
(`k8s.io/api/resource/v1/types.go`: `spec.driver`, `spec.nodeName`, one pool named
after the node, complete in one slice), owned by its Node so the garbage collector
removes it with the Node; the cluster admin creates the DeviceClasses. kwok plays
the kubelet and runs no plugin, so the sandbox publishes them itself:

- a fleet entry (a Node) may carry `devices: {driver, count, attributes}`
  (attributes: `productName: H100`, numbers and booleans as such): it becomes that
  node's slice, and each driver named gets a DeviceClass of its name selecting
  `device.driver == "<driver>"` unless the fleet file holds a DeviceClass so named;
- a fleet file may also hold ResourceSlices and DeviceClasses as `kubectl get
  nodes,resourceslices,deviceclasses -o yaml` prints them (the `gangkeeper check
  --nodes` input, e.g. examples/dra/fleet.yaml); they are created as given.

kube-scheduler's DynamicResources plugin (GA, on by default) allocates the claims;
kube-controller-manager's resourceclaim-controller makes each pod's claims from its
templates (control_plane.KCM_CONTROLLERS). Nothing prepares a device: a pod bound
with its claims allocated is run by kwok like any other.

`split_fleet`, `resource_slice`, `device_class` are pure; `publish` writes through a
kubernetes `ApiClient` it is given (no files, no processes).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import SandboxError

GROUP, VERSION = "resource.k8s.io", "v1"
#: The driver the e2e tests and examples/dra/fleet.yaml name.
DRIVER = "gpu.example.com"
FLEET_KINDS = ("Node", "ResourceSlice", "DeviceClass")


def _attribute(value: object, where: str) -> dict[str, object]:
    """A `DeviceAttribute` (exactly one of bool, int, string, version)."""
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, str):
        return {"string": value}
    raise SandboxError(f"{where}: must be a string, an integer or a boolean, got {value!r}")


def resource_slice(
    node_name: str,
    count: int,
    *,
    driver: str = DRIVER,
    attributes: Mapping[str, object] | None = None,
    where: str = "",
) -> dict[str, Any]:
    """The slice a driver publishes for `node_name`: `count` devices, one pool, complete."""
    where = where or f"devices of {node_name}"
    attrs = {k: _attribute(v, f"{where}.attributes.{k}") for k, v in (attributes or {}).items()}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{i}", **({"attributes": copy.deepcopy(attrs)} if attrs else {})}
                for i in range(count)
            ],
        },
    }


def device_class(
    name: str,
    *,
    driver: str = DRIVER,
    expression: str = "",
    extended_resource_name: str = "",
) -> dict[str, Any]:
    """A DeviceClass selecting the driver's devices (and `expression`, when given)."""
    selectors = [{"cel": {"expression": f'device.driver == "{driver}"'}}]
    if expression:
        selectors.append({"cel": {"expression": expression}})
    spec: dict[str, Any] = {"selectors": selectors}
    if extended_resource_name:
        spec["extendedResourceName"] = extended_resource_name
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceClass",
            "metadata": {"name": name}, "spec": spec}


def _node_devices(node: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    raw = node.get("devices")
    if raw is None:
        return None
    name = str((node.get("metadata") or {}).get("name", ""))
    if not isinstance(raw, Mapping):
        raise SandboxError(f"{where}.devices: must be a mapping (driver, count, attributes)")
    unknown = sorted(set(raw) - {"driver", "count", "attributes"})
    if unknown:
        raise SandboxError(f"{where}.devices: unknown field {unknown[0]!r} "
                           "(driver, count, attributes)")
    count = raw.get("count")
    if type(count) is not int or count < 1:
        raise SandboxError(f"{where}.devices.count: must be a positive integer, got {count!r}")
    driver = raw.get("driver", DRIVER)
    if not isinstance(driver, str) or not driver:
        raise SandboxError(f"{where}.devices.driver: must be a driver name, got {driver!r}")
    attributes = raw.get("attributes") or {}
    if not isinstance(attributes, Mapping):
        raise SandboxError(f"{where}.devices.attributes: must be a mapping")
    return resource_slice(name, count, driver=driver, attributes=attributes,
                          where=f"{where}.devices")


def split_fleet(
    entries: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the Nodes, without their `devices`; the DRA objects to create after them:
    DeviceClasses first, then ResourceSlices). Bad entries raise SandboxError naming
    the entry and field."""
    nodes: list[dict[str, Any]] = []
    classes: dict[str, dict[str, Any]] = {}
    slices: list[dict[str, Any]] = []
    drivers: list[str] = []
    for i, entry in enumerate(entries):
        where = f"fleet item {i}"
        kind = entry.get("kind")
        if kind not in FLEET_KINDS:
            raise SandboxError(f"{where}: expected kind {', '.join(FLEET_KINDS)}, got {kind}")
        if kind == "DeviceClass":
            classes[str((entry.get("metadata") or {}).get("name", ""))] = dict(entry)
        elif kind == "ResourceSlice":
            slices.append(dict(entry))
        else:
            made = _node_devices(entry, where)
            nodes.append({k: v for k, v in entry.items() if k != "devices"})
            if made is not None:
                slices.append(made)
                drivers.append(made["spec"]["driver"])
    for driver in dict.fromkeys(drivers):
        classes.setdefault(driver, device_class(driver, driver=driver))
    return nodes, [*classes.values(), *slices]


def publish(api: Any, objects: Sequence[Mapping[str, Any]],
            log: Callable[[str], None] = lambda line: None) -> list[str]:
    """Create the DeviceClasses and ResourceSlices (`split_fleet`'s second list) through
    the kubernetes `ApiClient` `api`; a slice of an existing Node is owned by it.
    Returns `kind/name` of each."""
    from kubernetes import client

    if not objects:
        return []
    log(f"publishing {len(objects)} DeviceClasses and ResourceSlices")
    node_uids = {n.metadata.name: n.metadata.uid
                 for n in client.CoreV1Api(api).list_node().items if n.metadata is not None}
    custom = client.CustomObjectsApi(api)
    made = []
    for obj in objects:
        body = copy.deepcopy(dict(obj))
        meta = body.setdefault("metadata", {})
        for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
            meta.pop(key, None)
        plural = "deviceclasses" if body.get("kind") == "DeviceClass" else "resourceslices"
        node_name = (body.get("spec") or {}).get("nodeName")
        if plural == "resourceslices" and node_name in node_uids:
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name,
                                        "uid": node_uids[node_name]}]
        custom.create_cluster_custom_object(GROUP, VERSION, plural, body)
        made.append(f"{body.get('kind')}/{meta.get('name')}")
    return made
