"""`gangkeeper check`'s Dynamic Resource Allocation input (resource.k8s.io/v1).

`--nodes` may hold ResourceSlices and DeviceClasses beside the Nodes (as
`kubectl get nodes,resourceslices,deviceclasses -o yaml` prints them), and `-f` may
hold ResourceClaimTemplates and ResourceClaims. Each class's devices on a node become
an extended resource `dra:<class>` of the Node, and each pod's claims limits of it
(`policies.dra.extended`), so the packing check counts them like GPUs: a gang asking
for more devices than the nodes offer is refused with the numbers. A ResourceClaim
that several pods name counts once for their gang (`policies.dra.shared`). A request
narrowing its class with selectors of its own asks the devices both accept: once the
claims of -f are read, the Nodes are counted again for those selectors (`narrowed`).

With --kubeconfig the fleet is the cluster's (`kube.device_state.Devices`): a pod's
claims are charged through the ResourceClaimTemplates and ResourceClaims of its
namespace in the cluster, and those of -f, which win by name (they are what is about
to be applied). Where no device is counted (no DeviceClass, or the user may not list
them) the claims are not charged: they could not be counted against anything.

Reads nothing itself: works on the documents `check` loaded and what `check` listed.
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
    fewest_with_pools,
    nodes_with_devices,
    with_claim_limits,
    with_device_resources,
)
from gangkeeper.policies.dra.slices import ResourceSlice
from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.settings.config import Config

from ..files.manifests import Document, ManifestError
from ..kube.device_state import Devices

FLEET_KINDS = frozenset({"Node", "ResourceSlice", "DeviceClass"})
#: Read from -f for the pods' demand, not checked as workloads themselves.
CLAIM_KINDS = frozenset({"ResourceClaimTemplate", "ResourceClaim"})


@dataclasses.dataclass(frozen=True)
class Fleet:
    nodes: list[Mapping[str, Any]]
    config: Config
    #: The fewest devices of each class a node offers (what an All request asks).
    fewest: Mapping[str, int]
    #: With --kubeconfig: the cluster's devices, claim templates and claims.
    cluster: Devices | None = None
    #: The --nodes file's slices and classes (the Nodes are counted again with them).
    slices: tuple[ResourceSlice, ...] = ()
    classes: tuple[DeviceClass, ...] = ()
    raw_nodes: tuple[Mapping[str, Any], ...] = ()
    #: The narrowed keys (`claims.narrowed_key`) the Nodes were counted for.
    counted: frozenset[str] = frozenset()


def notes(fleet: Fleet) -> tuple[str, ...]:
    """What the fleet's count leaves out, for stderr (--kubeconfig only)."""
    if fleet.cluster is None:
        return ()
    if not fleet.cluster.served:
        return ("DRA devices are not counted: the cluster does not serve resource.k8s.io/v1",)
    return fleet.cluster.notes


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
    return Fleet(list(with_devices), with_device_resources(config, classes), fewest,
                 slices=tuple(slices), classes=tuple(classes), raw_nodes=tuple(nodes))


def narrowed(fleet: Fleet, claims: Claims) -> Fleet:
    """The fleet with its Nodes counted for the selectors of the claims' requests too
    (the same fleet when none narrows its class, or with --kubeconfig, whose Nodes the
    cluster's view counted)."""
    # A declared pool's nodes publish devices of attributes no one knows: a class a pool
    # offers is charged whole (a narrowed key not counted), never refused for the pool.
    pooled = {c for pool in fleet.config.pools for c in pool.devices}
    keys = {k: v for d in (*claims.templates.values(), *claims.shared.values())
            for k, v in d.narrowed.items() if v[0] not in pooled}
    if not keys or not fleet.classes or keys.keys() <= fleet.counted:
        return fleet
    nodes, fewest = nodes_with_devices(fleet.raw_nodes, fleet.slices, fleet.classes,
                                       narrowed=keys)
    return dataclasses.replace(fleet, nodes=list(nodes), fewest=fewest,
                               counted=frozenset(keys))


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
    docs: list[Document], claims: Claims, fleet: Fleet
) -> tuple[list[Document], list[str]]:
    """The documents with their pods' claims as device limits (see the module docstring)."""
    cluster = fleet.cluster
    if cluster is not None and not cluster.counted:
        return docs, []
    out: list[Document] = []
    errors: list[str] = []
    for doc in docs:
        templates, shared = claims.templates, claims.shared
        if cluster is not None:
            namespace = _namespace(doc.obj)
            templates = {**cluster.templates(namespace), **templates}
            shared = {**cluster.claims(namespace), **shared}
        try:
            # A declared pool's nodes offer devices too (what an All request asks).
            fewest = fewest_with_pools(fleet.fewest, fleet.config.pools)
            obj = with_claim_limits(doc.obj, templates, fewest, shared, _counted(fleet))
        except InvalidObject as exc:
            if cluster is not None and not cluster.templates_read:
                # The template may be one this user may not list: its devices are not
                # counted (the note says why), as the webhooks do a template not known.
                out.append(doc)
                continue
            errors.append(f"{doc.where}: {exc}")
            continue
        out.append(dataclasses.replace(doc, obj=obj))
    return out, errors


def _counted(fleet: Fleet) -> frozenset[str]:
    """The narrowed keys the fleet's Nodes offer (the cluster's view's, --kubeconfig)."""
    if fleet.cluster is not None:
        return fleet.cluster.view.counted
    return fleet.counted


def _namespace(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    return namespace if isinstance(namespace, str) else ""
