"""What a gangkeeper process knows of Dynamic Resource Allocation (resource.k8s.io/v1).

`DeviceView` follows ResourceSlices, DeviceClasses, ResourceClaimTemplates and
ResourceClaims through the process's informers and gives the webhooks and the
controller the same view `gangkeeper check` has (`policies.dra.extended`): every Node
passes on to its subscriber (the admission capacity, the controller's node store) with
its classes' devices as allocatable `dra:<class>` (and the class's
`extendedResourceName` where the Node lists none), and pods, pod templates and owners
ask their claims' devices as limits of those names (`with_claims`, `owners`). So a gang
whose members ask more devices than the fleet's slices offer is refused at creation and
on `--dry-run=server`, with the numbers, and the controller releases a DRA gang only
when all its devices are free, each member pinned where its devices are when a count
can promise that (`pinning`, `policies.dra.pinnable`; otherwise unpinned, with the
reason).

ResourceClaims count twice over:
- as demand: a shared claim (`resourceClaimName`) a pod names is asked under a name of
  its own, which the admission's gang charges once (`policies.dra.shared`); the
  controller's pods ask none (`with_claims(shared=False)`);
- as use: the devices an allocated claim no Pod owns holds (`policies.dra.allocated`)
  reach the Node as `status[HELD_BY_CLAIMS]`, which the controller counts as used on
  it and "could ever run" ignores. A claim made for one pod from a template is left to
  its pod, whose limits the controller counts once it is bound.

What it does not do (docs/policy.md, "Dynamic Resource Allocation"): a template's claim
allocated before its pod is bound looks free until the binding; a shared claim not yet
allocated is not asked by the controller's gang. A request's own selectors are applied:
when the templates and claims bring a new set of them, every Node passes on again
counted for each (`dra:<class>#<hash>`, `policies.dra.extended`), and only then may a
request be charged that key (`counted`); until then it is charged against its class, as
`check` does for keys it did not count, and leaves its gang unpinned
(`policies.dra.pinnable`); once counted, it is pinned by that count like any other.

Slices, classes and claims that hold devices change when drivers start or users create
them, not per pod: such a change recomputes every Node (O(nodes + slices)), and during
the first list only once, when it ends; a claim made for a pod changes no Node.

It lives under `kube` (beside the informers it subscribes to) because both the server
and the controller use it, and neither may import the other.

May read through the informers (list and watch); never writes to the cluster.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from gangkeeper.policies.dra import (
    DeviceClass,
    DeviceDemand,
    read_claim,
    read_claim_template,
    read_device_class,
    read_resource_slice,
)
from gangkeeper.policies.dra.allocated import DeviceKey, allocated_node, held_devices
from gangkeeper.policies.dra.extended import (
    PREFIX,
    fewest_with_pools,
    nodes_with_devices,
    with_claim_limits,
)
from gangkeeper.policies.dra.pinnable import Pinning, pinning
from gangkeeper.policies.dra.slices import ResourceSlice
from gangkeeper.policies.errors import InvalidObject, PolicyError
from gangkeeper.policies.memo import MISSING, IdentityMemo
from gangkeeper.policies.model import JSON_OBJECT
from gangkeeper.policies.settings.config import Config, NodePool

from .informer import object_key
from .resources import Resource

log = logging.getLogger(__name__)

SLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", namespaced=False)
CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False)
CLAIM_TEMPLATES = Resource("resource.k8s.io", "v1", "resourceclaimtemplates",
                           "ResourceClaimTemplate")
CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim")
RESOURCES = (SLICES, CLASSES, CLAIM_TEMPLATES, CLAIMS)
#: Every class's devices are counted as GPUs (a class is an accelerator's class).
DEVICE_PATTERN = PREFIX + "*"


def with_device_names(config: Config) -> Config:
    """The config also counting `dra:<class>` resources as GPUs."""
    if config.is_gpu_resource(PREFIX + "any"):
        return config
    return dataclasses.replace(config, gpu_resources=(*config.gpu_resources, DEVICE_PATTERN))


class NodeSink(Protocol):
    """What receives Nodes: the capacity's subscriber (`cluster_view._NodeCapacity`)."""

    def upsert(self, node: Mapping[str, Any]) -> None: ...

    def delete(self, node: Mapping[str, Any]) -> None: ...

    def relisted(self, keys: set[str]) -> None: ...


Listed = Callable[[Resource], None]


class _Store:
    """Subscriber keeping one kind's objects, read by `read`, calling `changed`."""

    def __init__(self, resource: Resource, read: Callable[[Mapping[str, Any]], Any],
                 changed: Callable[[], None], on_listed: Listed) -> None:
        self.resource, self._read, self._changed, self._on_listed = (
            resource, read, changed, on_listed)
        self.items: dict[str, Any] = {}
        #: Counts the changes of `items`: answers computed from them are kept by it.
        self.version = 0
        self.lock = threading.Lock()
        #: Until the first list ends, changes are not passed on: one recompute, at its end.
        self.listed = False

    def upsert(self, obj: Mapping[str, Any]) -> None:
        try:
            value = self._read(obj)
        except PolicyError as exc:
            # One bad object must not blind the view to the others; it counts as absent.
            # ("name" is a LogRecord attribute: as an `extra` key it raises KeyError.)
            log.warning("ignored", extra={"kind": self.resource.kind,
                                          "object": object_key(obj), "error": str(exc)})
            self.delete(obj)
            return
        with self.lock:
            self.items[object_key(obj)] = value
            self.version += 1
        if self.listed:
            self._changed()

    def delete(self, obj: Mapping[str, Any]) -> None:
        with self.lock:
            gone = self.items.pop(object_key(obj), None)
            self.version += 1
        if gone is not None and self.listed:
            self._changed()

    def relisted(self, keys: set[str]) -> None:
        with self.lock:
            stale = [k for k in self.items if k not in keys]
            for key in stale:
                del self.items[key]
            self.version += 1
        first, self.listed = not self.listed, True
        if stale or first:
            self._changed()
        self._on_listed(self.resource)

    def values(self) -> list[Any]:
        with self.lock:
            return list(self.items.values())


def _template(obj: Mapping[str, Any]) -> tuple[str, tuple[str, DeviceDemand]]:
    return _namespace(obj), read_claim_template(obj)


def _claim(obj: Mapping[str, Any]
           ) -> tuple[str, tuple[str, DeviceDemand], frozenset[DeviceKey], str | None]:
    return _namespace(obj), read_claim(obj), held_devices(obj), allocated_node(obj)


def names_shared(spec: Mapping[str, Any]) -> bool:
    """Whether the pod spec names a ResourceClaim it shares (`resourceClaimName`)."""
    return any(isinstance(e, Mapping) and e.get("resourceClaimName")
               for e in spec.get("resourceClaims") or ())  # fmt: skip


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


class DeviceView:
    """Nodes with their devices for the capacity, and claims as limits (module docstring)."""

    def __init__(
        self, sink: NodeSink, on_listed: Listed = lambda resource: None,
        pools: tuple[NodePool, ...] = (), on_claims: Callable[[], None] = lambda: None,
    ) -> None:
        self._sink = sink
        #: Called after a ResourceClaim changed: what the controller read of pods that
        #: share claims (`pinning`) is read again.
        self._on_claims = on_claims
        #: The config's declared pools: their devices bound what an All request asks.
        self._pools = pools
        self._nodes: dict[str, Mapping[str, Any]] = {}
        self._lock = threading.Lock()
        #: Held from computing a Node's devices to handing it on: the Node informer's
        #: thread and a slice or class one both deliver Nodes, and a Node computed
        #: with the old devices must not reach the sink after the refresh did (it
        #: would undo it until the Node next changes).
        self._deliver = threading.Lock()
        self._fewest: dict[str, int] = {}
        #: Counts slice and class changes (`_with_devices`: the Nodes' versions).
        self._generation = 0
        self.slices = _Store(SLICES, read_resource_slice, self._refresh, on_listed)
        self.classes = _Store(CLASSES, read_device_class, self._refresh, on_listed)
        self.templates = _Store(CLAIM_TEMPLATES, _template, self._narrowed_changed, on_listed)
        #: ResourceClaims: a pod naming one shares it (its gang asks its devices once),
        #: and an allocated one holds its devices (`_held_changed`).
        self.claims = _Store(CLAIMS, _claim, self._claims_changed, on_listed)
        #: The devices allocated claims hold that no pod's limits count.
        self._held: frozenset[DeviceKey] = frozenset()
        #: The narrowed keys of the templates' and claims' requests (a request's own
        #: selectors: key -> class, expressions) the Nodes are counted for, and those
        #: the Nodes passed on so far were counted for (`counted`: published once the
        #: Nodes are, so a request is never charged a key no Node offers yet).
        self._narrowed: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._counted: frozenset[str] = frozenset()

    # -- the Node subscriber, in front of the capacity's ----------------------------

    def upsert(self, node: Mapping[str, Any]) -> None:
        with self._deliver:
            with self._lock:
                self._nodes[object_key(node)] = node
            self._sink.upsert(self._with_devices([node])[0])

    def delete(self, node: Mapping[str, Any]) -> None:
        with self._deliver:
            with self._lock:
                self._nodes.pop(object_key(node), None)
            self._sink.delete(node)

    def relisted(self, keys: set[str]) -> None:
        with self._deliver:
            with self._lock:
                for key in [k for k in self._nodes if k not in keys]:
                    del self._nodes[key]
            self._sink.relisted(keys)

    def _with_devices(
        self, nodes: list[Mapping[str, Any]],
        narrowed: Mapping[str, tuple[str, tuple[str, ...]]] | None = None,
    ) -> list[Mapping[str, Any]]:
        classes: list[DeviceClass] = self.classes.values()
        slices: list[ResourceSlice] = self.slices.values()
        if narrowed is None:
            with self._lock:
                narrowed = dict(self._narrowed)
        if classes:
            out, fewest = nodes_with_devices(nodes, slices, classes, self._held, narrowed)
        else:  # nothing to add: a shallow copy, for the version below
            out = [{**n, "metadata": dict(n.get("metadata") or {})} for n in nodes]
            fewest = {}
        with self._lock:
            generation = self._generation
            for name, count in fewest.items():
                self._fewest[name] = min(self._fewest.get(name, count), count)
        for node in out:
            # A sink that skips versions it holds (`informer.Store`, the controller's)
            # must take a Node whose devices changed though the Node did not: its
            # version gets the devices' generation (opaque versions that differ are
            # newer; the same Node and devices give the same version).
            meta = node.setdefault("metadata", {})
            meta["resourceVersion"] = f"{meta.get('resourceVersion') or ''}+dra{generation}"
        return list(out)

    def _claims_changed(self) -> None:
        self._held_changed()
        self._narrowed_changed()
        self._on_claims()

    def _narrowed_changed(self) -> None:
        """A template or claim changed: the Nodes pass on again, counted for every
        request's own selectors, when the set of them changed (rare: a new kind of
        request, not a new claim of one)."""
        wanted: dict[str, tuple[str, tuple[str, ...]]] = {}
        for _, (_, demand) in self.templates.values():
            wanted.update(demand.narrowed)
        for _, (_, demand), _, _ in self.claims.values():
            wanted.update(demand.narrowed)
        with self._lock:
            if wanted == self._narrowed:
                return
            self._narrowed = wanted
        self._refresh()

    def _held_changed(self) -> None:
        """A claim changed: the Nodes pass on again only when the devices held did (a
        claim made for one pod, most of them, holds none here: its pod counts them)."""
        held = frozenset().union(*(keys for _, _, keys, _ in self.claims.values()))
        with self._lock:
            if held == self._held:
                return
            self._held = held
        self._refresh()

    def _refresh(self) -> None:
        """A slice or class changed: every Node passes on again with its devices."""
        with self._deliver:
            with self._lock:
                nodes = list(self._nodes.values())
                self._fewest = {}
                self._generation += 1
                narrowed = dict(self._narrowed)
            known = {c.name for c in self.classes.values()}
            for node in self._with_devices(nodes, narrowed):
                self._sink.upsert(node)
            with self._lock:
                # Only keys of a class the Nodes were counted with offer anything.
                self._counted = frozenset(k for k, (c, _) in narrowed.items() if c in known)

    def extended_names(self) -> frozenset[str]:
        """The resources the known DeviceClasses serve by `extendedResourceName`."""
        return served_by_classes(self.classes.values())

    @property
    def stores(self) -> tuple[_Store, ...]:
        """The view's subscribers, one per kind of `RESOURCES`."""
        return (self.slices, self.classes, self.templates, self.claims)

    def subscribe(self, informers: Any) -> None:
        """Subscribe the stores to `informers` (`kube.informer.Informers`); the Nodes
        are the caller's to subscribe (this view in front of its sink)."""
        for store in self.stores:
            informers.subscribe(store.resource, store)

    # -- what the webhooks and the controller ask ------------------------------------

    def with_claims(self, obj: Mapping[str, Any], namespace: str, *, shared: bool = True
                    ) -> tuple[Mapping[str, Any], tuple[str, ...]]:
        """`obj` with its pod specs' claims as device limits, and a warning when a
        claim's template is not known (its devices are then not counted). With
        `shared`, the shared ResourceClaims it names too, under their own names
        (`policies.dra.shared`: the admission's gang counts each once)."""
        if not _has_claims(obj) or not self.classes.values():
            return obj, ()  # no claim, or no DeviceClass a claim could be counted as
        templates = dict(
            entry for ns, entry in self.templates.values() if ns == namespace)
        claims = dict(
            entry for ns, entry, _, _ in self.claims.values() if ns == namespace
        ) if shared else None
        try:
            return with_claim_limits(obj, templates, self.fewest, claims, self.counted), ()
        except InvalidObject as exc:
            # The template may be created after its workload (the claim controller
            # waits for it too): admit, and say that its devices were not counted.
            # What and why first: the API server may show only a warning's start.
            return obj, (f"devices not counted ({exc.message}): gangkeeper cannot tell "
                         f"whether the gang could ever fit; at {exc.path}",)

    @property
    def counted(self) -> frozenset[str]:
        """The narrowed keys (a request's own selectors, `policies.dra.claims.
        narrowed_key`) the Nodes passed on are counted for; a request naming another
        is charged against its class (`extended.with_claim_limits`)."""
        with self._lock:
            return self._counted

    @property
    def fewest(self) -> dict[str, int]:
        """The fewest devices of each class a node, live or of a declared pool, offers
        (what an All request asks)."""
        with self._lock:
            return fewest_with_pools(self._fewest, self._pools)

    def pinning(self, pod: Mapping[str, Any], namespace: str) -> Pinning | None:
        """What the release may promise of `pod`'s claims (`policies.dra.pinnable`):
        why their free devices cannot place it, what firstAvailable may take beyond
        their count, the shared claims its sharers are pinned together by; None when
        it has none, or no DeviceClass is known (its claims' devices are not counted).
        The namespace's claims are read only for a pod that names one."""
        spec = pod.get("spec")
        if not isinstance(spec, Mapping) or not spec.get("resourceClaims"):
            return None
        if not self.classes.values():
            return None
        templates = dict(entry for ns, entry in self.templates.values() if ns == namespace)
        shared = {name: (node, demand)
                  for ns, (name, demand), _, node in self.claims.values()
                  if ns == namespace} if names_shared(spec) else {}  # fmt: skip
        return pinning(spec, templates, counted=self.counted, shared=shared,
                       fewest=self.fewest)

    def owners(self, lookup: Callable[[str, str, str, str], Any]
               ) -> Callable[[str, str, str, str], Any]:
        """`lookup` (an owner lookup: apiVersion, kind, namespace, name) whose owners'
        pod templates ask their claims' devices as limits, so a pod's gang is sized
        with them (the pod webhook reads the gang from the owner).

        The same owner object (a watch-fed cache's, until it changes) gets the same
        answer while no slice, class, template or claim changed: every pod of a Job
        then asks about one object, and the recognisers' memory of the owner's gangs
        (`OwnerGangs`, by identity) holds (bench/dra.py: 5x the extended-resource
        pod decision without this)."""
        answers: IdentityMemo[tuple[int, ...], Any] = IdentityMemo(1024)

        def with_devices(api_version: str, kind: str, namespace: str, name: str) -> Any:
            owner = lookup(api_version, kind, namespace, name)
            if not isinstance(owner, Mapping):
                return owner
            versions = tuple(store.version for store in self.stores)
            answer = answers.lookup(versions, owner)
            if answer is MISSING:
                answer = self.with_claims(owner, namespace)[0]
                answers.put(versions, owner, answer)
            return answer

        return with_devices


def served_by_classes(classes: list[DeviceClass]) -> frozenset[str]:
    """The `extendedResourceName`s of `classes` (KEP-5004: requests of such a name are
    served from the class's devices where a Node lists none of it)."""
    return frozenset(c.extended_resource_name for c in classes if c.extended_resource_name)


def _has_claims(value: Any, depth: int = 0) -> bool:
    """Whether a pod spec in `value` names a claim (cheap: most objects have none;
    a pod spec holds no other, and metadata and status hold none)."""
    if depth > 12:
        return False
    if isinstance(value, JSON_OBJECT):
        if "containers" in value:
            return bool(value.get("resourceClaims"))
        return any(_has_claims(v, depth + 1) for k, v in value.items()
                   if isinstance(v, _NESTED) and k not in ("metadata", "status"))
    if isinstance(value, list):
        return any(_has_claims(v, depth + 1) for v in value if isinstance(v, _NESTED))
    return False


_NESTED = (dict, list, Mapping)
