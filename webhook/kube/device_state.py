"""DRA devices as the one-shot readers see them: `status`, `explain`, `check
--kubeconfig` and `view` list the ResourceSlices, DeviceClasses, ResourceClaimTemplates
and ResourceClaims (resource.k8s.io/v1) once and feed them to a `DeviceView`, as the
informers feed the server's and the controller's. So every command counts devices as
the controller does: Nodes with their classes' devices (and what allocated claims
hold), pods asking their claims' devices.

What this user may not list (403), or an API server that does not serve
resource.k8s.io/v1 (404), is not an error: the devices (or the claims) are then not
counted, and `Devices.notes` says what was left out (`served` is False for a 404:
nothing is left out there, no device can be published).

It lives under `kube` (beside the `DeviceView` it feeds) because the CLI and the view
both use it, and the view may not import the CLI.

May touch: the API, lists only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gangkeeper.policies.dra import DeviceDemand
from gangkeeper.policies.settings.config import Config, NodePool

from .api import Api, ApiError
from .device_view import CLAIM_TEMPLATES, CLAIMS, CLASSES, SLICES, DeviceView, with_device_names
from .informer import list_all, object_key
from .resources import Resource

#: The statuses that leave a kind out instead of failing the command.
_LEFT_OUT = {403: "forbidden", 404: "not served"}


class _Nodes:
    """The Nodes a `DeviceView` passes on, with their devices."""

    def __init__(self) -> None:
        self.nodes: dict[str, Mapping[str, Any]] = {}

    def upsert(self, node: Mapping[str, Any]) -> None:
        self.nodes[object_key(node)] = node

    def delete(self, node: Mapping[str, Any]) -> None:
        self.nodes.pop(object_key(node), None)

    def relisted(self, keys: set[str]) -> None:
        self.nodes = {k: v for k, v in self.nodes.items() if k in keys}


@dataclass(frozen=True)
class Devices:
    """What the cluster's DRA objects give a one-shot reader (`read_devices`)."""

    view: DeviceView
    #: The Nodes given, with their classes' devices where any DeviceClass was listed.
    nodes: list[Mapping[str, Any]]
    #: A DeviceClass was listed: devices are counted.
    counted: bool
    #: The cluster's ResourceClaimTemplates were listed (a pod naming one that is not
    #: there names one that does not exist, not one this user may not see).
    templates_read: bool
    #: resource.k8s.io/v1 is served (False: no device can be published).
    served: bool
    #: What this user may not list, and what is therefore not counted.
    notes: tuple[str, ...]

    def config(self, config: Config) -> Config:
        """`config`, counting the classes' devices as GPUs where any is counted."""
        return with_device_names(config) if self.counted else config

    def pods(self, pods: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The pods asking their claims' devices as the controller reads them: not
        their shared claims, whose devices count on their node once allocated
        (`DeviceView.with_claims`)."""
        if not self.counted:
            return pods
        return [self.view.with_claims(p, _namespace(p), shared=False)[0] for p in pods]

    def templates(self, namespace: str) -> dict[str, DeviceDemand]:
        """The demand of each ResourceClaimTemplate of `namespace`, by name."""
        return dict(entry for ns, entry in self.view.templates.values() if ns == namespace)

    def claims(self, namespace: str) -> dict[str, DeviceDemand]:
        """The demand of each ResourceClaim of `namespace`, by name (shared claims)."""
        return dict(entry for ns, entry, _ in self.view.claims.values() if ns == namespace)

    @property
    def fewest(self) -> dict[str, int]:
        """The fewest devices of each class a node offers (what an All request asks)."""
        return self.view.fewest


def read_devices(
    api: Api, nodes: list[Mapping[str, Any]], pools: tuple[NodePool, ...] = ()
) -> Devices:
    """The DRA objects listed through `api`, fed with `nodes` to a `DeviceView` (with
    the config's declared `pools`); ApiError for any failure but 403 and 404 (module
    docstring)."""
    sink = _Nodes()
    view = DeviceView(sink, pools=pools)
    left_out: dict[str, str] = {}
    listed: dict[Resource, list[Mapping[str, Any]]] = {}
    for store in view.stores:
        try:
            listed[store.resource] = list_all(api, store.resource.path)
        except ApiError as exc:
            if exc.status not in _LEFT_OUT:
                raise
            listed[store.resource] = []
            left_out[store.resource.plural] = _LEFT_OUT[exc.status]
    served = "not served" not in left_out.values()
    # Classes without their slices would offer no device: every DRA gang refused.
    counted = bool(listed[CLASSES]) and SLICES.plural not in left_out
    if counted:
        for node in nodes:
            view.upsert(node)
        view.relisted({object_key(n) for n in nodes})
        for store in view.stores:
            objects = listed[store.resource]
            for obj in objects:
                store.upsert(obj)
            store.relisted({object_key(o) for o in objects})
    return Devices(
        view=view, nodes=list(sink.nodes.values()) if counted else nodes, counted=counted,
        templates_read=CLAIM_TEMPLATES.plural not in left_out, served=served,
        notes=_notes(left_out, counted) if served else ())


def _notes(left_out: Mapping[str, str], counted: bool) -> tuple[str, ...]:
    """What a user who may not list some DRA kinds is told is missing."""
    if not left_out:
        return ()
    what = ", ".join(f"{plural} ({why})" for plural, why in left_out.items())
    if not counted:
        if SLICES.plural in left_out or CLASSES.plural in left_out:
            return (f"DRA devices are not counted: cannot list {what} of resource.k8s.io/v1",)
        return ()  # no DeviceClass: no device to count, whatever else is hidden
    kinds = [plural for plural in (CLAIM_TEMPLATES.plural, CLAIMS.plural) if plural in left_out]
    if not kinds:
        return ()
    return (f"cannot list {what} of resource.k8s.io/v1: the devices pods ask through "
            f"{' or '.join(kinds)} of the cluster (or allocated claims hold) are not counted",)


def with_devices(
    api: Api, config: Config, pods: list[Mapping[str, Any]], nodes: list[Mapping[str, Any]]
) -> tuple[Config, list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(config, Pods, Nodes) as the controller sees them where DRA devices are
    published (`read_devices`): Nodes with their classes' devices and what allocated
    claims hold, pods asking their claims' devices. The same as given where no
    DeviceClass is served or may be read."""
    devices = read_devices(api, nodes, config.pools)
    if not devices.counted:
        return config, pods, nodes
    return devices.config(config), devices.pods(pods), devices.nodes


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")
