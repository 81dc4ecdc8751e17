"""`gangkeeper check`'s Dynamic Resource Allocation input (resource.k8s.io/v1).

`--nodes` may hold ResourceSlices and DeviceClasses beside the Nodes (as
`kubectl get nodes,resourceslices,deviceclasses -o yaml` prints them), and `-f` may
hold ResourceClaimTemplates and ResourceClaims. Each class's devices on a node become
an extended resource `dra:<class>` of the Node, and each pod's claims limits of it
(`policies.dra.extended`), so the packing check counts them like GPUs: a gang asking
for more devices than the nodes offer is refused with the numbers. A ResourceClaim
that several pods name counts once for their gang (`policies.dra.shared`).

Reads nothing itself: works on the documents `check` loaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gangkeeper.policies.dra import (
    DeviceClass,
    DeviceDemand,
    read_claim,
    read_claim_template,
    read_device_class,
    read_resource_slice,
)
from gangkeeper.policies.dra.extended import (
    nodes_with_devices,
    with_claim_limits,
    with_device_resources,
)
from gangkeeper.policies.dra.slices import ResourceSlice
from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.settings.config import Config

from ..files.manifests import Document, ManifestError

FLEET_KINDS = frozenset({"Node", "ResourceSlice", "DeviceClass"})
#: Read from -f for the pods' demand, not checked as workloads themselves.
CLAIM_KINDS = frozenset({"ResourceClaimTemplate", "ResourceClaim"})


@dataclasses.dataclass(frozen=True)
class Fleet:
    nodes: list[Mapping[str, Any]]
    config: Config
    #: The fewest devices of each class a node offers (what an All request asks).
    fewest: Mapping[str, int]


def read_fleet(docs: list[Document], config: Config) -> Fleet:
    """The Nodes of a --nodes file, with the devices its slices give them."""
    nodes: list[Mapping[str, Any]] = []
    slices: list[ResourceSlice] = []
    classes: list[DeviceClass] = []
    for doc in docs:
        kind = doc.obj.get("kind")
        if kind not in FLEET_KINDS:
            raise ManifestError(
                f"{doc.where}: expected kind Node, ResourceSlice or DeviceClass, got {kind}"
            )
        try:
            if kind == "ResourceSlice":
                slices.append(read_resource_slice(doc.obj))
            elif kind == "DeviceClass":
                classes.append(read_device_class(doc.obj))
            else:
                nodes.append(doc.obj)
        except InvalidObject as exc:
            raise ManifestError(f"{doc.where}: {exc}") from exc
    if not classes:
        return Fleet(nodes, config, {})
    with_devices, fewest = nodes_with_devices(nodes, slices, classes)
    return Fleet(list(with_devices), with_device_resources(config, classes), fewest)


@dataclasses.dataclass(frozen=True)
class Claims:
    """What the ResourceClaimTemplates and ResourceClaims of -f ask, by name."""

    templates: dict[str, DeviceDemand] = dataclasses.field(default_factory=dict)
    #: Shared ResourceClaims: counted once for the pods of a gang naming them.
    shared: dict[str, DeviceDemand] = dataclasses.field(default_factory=dict)


def take_claims(docs: list[Document]) -> tuple[list[Document], Claims, list[str]]:
    """(the other documents, the claims and claim templates, errors)."""
    rest: list[Document] = []
    claims = Claims()
    errors: list[str] = []
    for doc in docs:
        kind = doc.obj.get("kind")
        if kind not in CLAIM_KINDS:
            rest.append(doc)
            continue
        template = kind == "ResourceClaimTemplate"
        try:
            name, demand = (read_claim_template if template else read_claim)(doc.obj)
        except InvalidObject as exc:
            errors.append(f"{doc.where}: {exc}")
            continue
        (claims.templates if template else claims.shared)[name] = demand
    return rest, claims, errors


def with_claims(
    docs: list[Document], claims: Claims, fewest: Mapping[str, int]
) -> tuple[list[Document], list[str]]:
    """The documents with their pods' claims as device limits (see the module docstring)."""
    out: list[Document] = []
    errors: list[str] = []
    for doc in docs:
        try:
            obj = with_claim_limits(doc.obj, claims.templates, fewest, claims.shared)
        except InvalidObject as exc:
            errors.append(f"{doc.where}: {exc}")
            continue
        out.append(dataclasses.replace(doc, obj=obj))
    return out, errors
