"""What the server knows about the cluster: GPU capacity and the owners of pods.

`ClusterView` is the small interface the app asks at admission time:
  - `capacity`: a `gangkeeper.policies.cluster.capacity.Capacity` (nodes + bound pods' GPUs);
  - `lookup(api_version, kind, namespace, name)`: an `OwnerLookup` over cached owners;
  - `siblings(namespace, gang_name)`: a `PodsLookup` over cached gang pods, so a
    pod-based gang (annotated pods, Kueue pod groups) is summed over its members;
  - `synced`: every watched resource has been listed at least once.

Two implementations:
  - `StaticClusterView`: nodes (and, optionally, workload manifests as owners) given
    once — `gangkeeper serve` on a laptop, and the HTTP tests;
  - `WatchClusterView`: subscribes to the process's informers (`kube.informer`) for
    Nodes, Pods (the GPUs of bound, unfinished ones, for the "does not fit now"
    warning, and the members of pod-based gangs) and every owner kind a gang is sized
    from. The gang controller
    subscribes to the same Pod and Node informers, so each event is received once.
    An owner CRD that is not installed counts as listed (empty). Admission never
    waits on the API server in steady state: the lookup answers from the cache, and
    only on a miss (an owner created a moment ago, not yet seen by the watch) does it
    do one direct GET with a short timeout, with a negative cache so a burst of pods
    of one unknown owner costs one call.

May call the Kubernetes API (GET, through the informers' `Api`); never writes to the
cluster and holds no HTTP server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.errors import OwnerNotCached, PolicyError
from gangkeeper.policies.model import KubeObject
from gangkeeper.policies.names import GANG_LABEL, GANG_NAME_ANNOTATION
from gangkeeper.policies.podspec import pod_demand
from gangkeeper.policies.recognizers.capabilities import followed_owners
from gangkeeper.policies.recognizers.kueue import GROUP_LABEL as KUEUE_GROUP_LABEL
from gangkeeper.policies.recognizers.pod_gangs import siblings_among
from gangkeeper.policies.recognizers.registry import default_registry
from gangkeeper.policies.settings.config import Config

from ..kube.device_view import DeviceView
from ..kube.informer import Informer, Informers, object_key
from ..kube.resources import NODES, PODS, Resource

log = logging.getLogger(__name__)


class ClusterView(Protocol):
    @property
    def capacity(self) -> Capacity: ...

    def lookup(self, api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        ...

    def siblings(self, namespace: str, gang_name: str) -> Sequence[KubeObject]: ...

    @property
    def synced(self) -> bool: ...


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _key(group: str, kind: str, namespace: str, name: str) -> tuple[str, str, str, str]:
    # The version is left out on purpose: an ownerReference may name another served
    # version of the kind we watch, and the object is the same.
    return (group, kind, namespace, name)


# --- static -----------------------------------------------------------------------------


class StaticClusterView:
    """A fixed fleet; owners from the given objects. Always synced."""

    #: An owner not among the given objects is given this way (`serve --owners`).
    owners_hint = "--owners FILE"

    def __init__(
        self, nodes: Sequence[KubeObject], config: Config, owners: Sequence[KubeObject] = ()
    ) -> None:
        self._capacity = Capacity.from_nodes(nodes, config)
        self._owners: dict[tuple[str, str, str, str], KubeObject] = {}
        cluster_scoped = _cluster_scoped_kinds()
        for obj in owners:
            meta = _meta(obj)
            no_namespace = "" if obj.get("kind") in cluster_scoped else "default"
            key = _key(
                _group(str(obj.get("apiVersion", ""))),
                str(obj.get("kind", "")),
                str(meta.get("namespace") or no_namespace),
                str(meta.get("name", "")),
            )
            self._owners[key] = obj
        # Pods among the given objects are the members of their pod-based gangs, as
        # `gangkeeper check` reads the same files.
        self._siblings = siblings_among(owners)

    @property
    def capacity(self) -> Capacity:
        return self._capacity

    def lookup(self, api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        return self._owners.get(_key(_group(api_version), kind, namespace, name)) or (
            self._owners.get(_key(_group(api_version), kind, "", name))
        )

    def siblings(self, namespace: str, gang_name: str) -> Sequence[KubeObject]:
        return self._siblings(namespace, gang_name)

    @property
    def synced(self) -> bool:
        return True




def _followed() -> tuple[Resource, ...]:
    """Owners the recognisers follow besides their own kinds (`FollowsOwners`: a
    LeaderWorkerSet's StatefulSets, a TrainJob's runtimes)."""
    return tuple(
        Resource(o.group, o.version, o.resource, o.kind, namespaced=o.namespaced)
        for o in followed_owners(default_registry())
    )


def _cluster_scoped_kinds() -> frozenset[str]:
    return frozenset(r.kind for r in _followed() if not r.namespaced)


def owner_resources() -> tuple[Resource, ...]:
    """Every kind a gang is sized from: each recogniser's rules (all served versions
    tried, an unserved one is simply absent) plus the owners they follow."""
    found: dict[tuple[str, str, str], Resource] = {}
    for recognizer in default_registry():
        for rule in recognizer.rules:
            for version in rule.versions:
                resource = Resource(rule.group, version, rule.resource, rule.kind)
                found.setdefault((rule.group, version, rule.resource), resource)
    for resource in _followed():
        found.setdefault((resource.group, resource.version, resource.plural), resource)
    return tuple(found.values())


Listed = Callable[[Resource], None]


class _NodeCapacity:
    """Subscriber: every Node into the capacity (a malformed one is left out)."""

    def __init__(self, capacity: Capacity, on_listed: Listed) -> None:
        self._capacity = capacity
        self._on_listed = on_listed
        self._names: dict[str, str] = {}  # object_key -> node name

    def upsert(self, node: Mapping[str, Any]) -> None:
        name = str(_meta(node).get("name") or "")
        try:
            self._capacity.upsert_node(node)
            self._names[object_key(node)] = name
        except PolicyError as exc:
            # One malformed Node must not blind the view to all the others.
            self._capacity.delete_node(name)
            self._names.pop(object_key(node), None)
            log.warning("node ignored", extra={"node": name, "error": str(exc)})

    def delete(self, node: Mapping[str, Any]) -> None:
        self._names.pop(object_key(node), None)
        self._capacity.delete_node(str(_meta(node).get("name") or ""))

    def relisted(self, keys: set[str]) -> None:
        for key in [k for k in self._names if k not in keys]:
            self._capacity.delete_node(self._names.pop(key))
        self._on_listed(NODES)


class _BoundPodCapacity:
    """Subscriber: the GPUs of bound, unfinished pods, counted on their nodes."""

    def __init__(self, capacity: Capacity, config: Config, on_listed: Listed) -> None:
        self._capacity = capacity
        self._config = config
        self._on_listed = on_listed
        self._uids: dict[str, str] = {}  # object_key -> uid, of pods counted

    def upsert(self, pod: Mapping[str, Any]) -> None:
        key, uid = object_key(pod), str(_meta(pod).get("uid") or "")
        spec = pod.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        node = spec.get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        demand: dict[str, int] = {}
        # A finished pod frees its GPUs; an unbound one holds none yet.
        if node and phase not in ("Succeeded", "Failed"):
            try:
                demand = pod_demand(spec, self._config)
            except PolicyError:
                demand = {}
        if demand:
            self._capacity.add_pod(uid, str(node), demand)
            self._uids[key] = uid
        else:
            self.delete(pod)

    def delete(self, pod: Mapping[str, Any]) -> None:
        uid = self._uids.pop(object_key(pod), None)
        if uid is not None:
            self._capacity.remove_pod(uid)

    def relisted(self, keys: set[str]) -> None:
        for key in [k for k in self._uids if k not in keys]:
            self._capacity.remove_pod(self._uids.pop(key))
        self._on_listed(PODS)


#: Pod spec fields `pod_demand` and `placement_of` read; a cached member keeps only these.
_DEMAND_FIELDS = ("overhead", "nodeSelector", "nodeName", "tolerations")
_CONTAINER_FIELDS = ("name", "resources", "restartPolicy")
#: resourceVersion too: the policy remembers what each sibling version gave
#: (`pod_gangs.SiblingFacts`), so a member is recognised once, not at every admission.
_MEMBER_META = (
    "name", "namespace", "uid", "resourceVersion", "labels", "annotations",
    "ownerReferences", "deletionTimestamp",
)


def _member_spec(spec: object) -> dict[str, Any]:
    if not isinstance(spec, Mapping):
        return {}
    kept: dict[str, Any] = {k: spec[k] for k in _DEMAND_FIELDS if k in spec}
    for field in ("containers", "initContainers"):
        items = spec.get(field)
        if isinstance(items, list):
            kept[field] = [
                {k: c[k] for k in _CONTAINER_FIELDS if k in c} if isinstance(c, Mapping) else c
                for c in items
            ]
        elif field in spec:
            kept[field] = items
    affinity = spec.get("affinity")
    if isinstance(affinity, Mapping) and "nodeAffinity" in affinity:
        kept["affinity"] = {"nodeAffinity": affinity["nodeAffinity"]}
    elif affinity is not None and not isinstance(affinity, Mapping):
        kept["affinity"] = affinity  # junk stays junk: the policy reports it
    return kept


class _GangMembers:
    """Subscriber: the live members of pod-based gangs, by (namespace, gang name).

    Two kinds, kept apart as two caches: gangkeeper's gang pods (they carry the gang
    label; the gang-name annotation names the gang) and Kueue pod-group pods (named by
    their label; gangkeeper leaves them unlabelled under onConflict). A member keeps
    only what the recognisers read: identity, keys and the spec its demand and
    placement come from.
    """

    KINDS = ("gang", "kueue")

    def __init__(self, on_listed: Listed) -> None:
        self._on_listed = on_listed
        self._lock = threading.Lock()
        self._members: dict[str, dict[tuple[str, str], dict[str, KubeObject]]] = {
            kind: {} for kind in self.KINDS
        }
        self._keys: dict[str, dict[str, tuple[str, str]]] = {kind: {} for kind in self.KINDS}

    @staticmethod
    def _gang_name(kind: str, meta: Mapping[str, Any]) -> object:
        labels = meta.get("labels")
        labels = labels if isinstance(labels, Mapping) else {}
        if kind == "kueue":
            return labels.get(KUEUE_GROUP_LABEL)
        if GANG_LABEL not in labels:
            return None
        annotations = meta.get("annotations")
        return annotations.get(GANG_NAME_ANNOTATION) if isinstance(annotations, Mapping) else None

    def _forget(self, kind: str, key: str) -> None:
        group_key = self._keys[kind].pop(key, None)
        if group_key is not None:
            group = self._members[kind].get(group_key, {})
            group.pop(key, None)
            if not group:
                self._members[kind].pop(group_key, None)

    def upsert(self, pod: Mapping[str, Any]) -> None:
        meta, key = _meta(pod), object_key(pod)
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        with self._lock:
            for kind in self.KINDS:
                self._forget(kind, key)
                name = self._gang_name(kind, meta)
                if finished or not isinstance(name, str):
                    continue
                group_key = (str(meta.get("namespace") or ""), name)
                self._members[kind].setdefault(group_key, {})[key] = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {k: meta[k] for k in _MEMBER_META if k in meta},
                    "spec": _member_spec(pod.get("spec")),
                }
                self._keys[kind][key] = group_key

    def delete(self, pod: Mapping[str, Any]) -> None:
        with self._lock:
            for kind in self.KINDS:
                self._forget(kind, object_key(pod))

    def relisted(self, keys: set[str]) -> None:
        with self._lock:
            for kind in self.KINDS:
                for key in [k for k in self._keys[kind] if k not in keys]:
                    self._forget(kind, key)
        self._on_listed(PODS)

    def siblings(self, namespace: str, gang_name: str) -> list[KubeObject]:
        with self._lock:
            return [
                pod
                for members in self._members.values()
                for pod in members.get((namespace, gang_name), {}).values()
            ]


class _Owners:
    """Subscriber: the objects of one owner resource, by (group, kind, namespace, name)."""

    def __init__(self, resource: Resource, on_listed: Listed) -> None:
        self.resource = resource
        self._on_listed = on_listed
        self._lock = threading.Lock()
        self.objects: dict[tuple[str, str, str, str], KubeObject] = {}

    def key(self, namespace: str, name: str) -> tuple[str, str, str, str]:
        r = self.resource
        return _key(r.group, r.kind, namespace if r.namespaced else "", name)

    def _key_of(self, obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
        meta = _meta(obj)
        return self.key(str(meta.get("namespace") or ""), str(meta.get("name") or ""))

    def upsert(self, obj: Mapping[str, Any]) -> None:
        with self._lock:
            self.objects[self._key_of(obj)] = obj

    def delete(self, obj: Mapping[str, Any]) -> None:
        with self._lock:
            self.objects.pop(self._key_of(obj), None)

    def relisted(self, keys: set[str]) -> None:
        with self._lock:
            for key in [k for k in self.objects if f"{k[2]}/{k[3]}" not in keys]:
                del self.objects[key]
        self._on_listed(self.resource)


class WatchClusterView:
    """Capacity and owners kept current by the process's informers (module docstring)."""

    MISS_TIMEOUT_SECONDS = 0.5
    #: A miss answered "not found" is not asked again for this long.
    NEGATIVE_TTL_SECONDS = 5.0
    MAX_NEGATIVE_ENTRIES = 10_000

    def __init__(
        self,
        informers: Informers,
        config: Config,
        *,
        owners: Sequence[Resource] | None = None,
        on_synced: Callable[[str, bool], None] | None = None,
        devices: bool = False,
    ) -> None:
        self._api = informers.api
        self._capacity = Capacity(config)
        self._notify = on_synced
        self._members = _GangMembers(self._listed)
        nodes: Any = _NodeCapacity(self._capacity, self._listed)
        #: ResourceSlices, DeviceClasses, claim templates and claims (`device_view`), or None.
        self.devices: DeviceView | None = None
        if devices:
            nodes = self.devices = DeviceView(nodes, self._listed, config.pools)
        self._informers: dict[Resource, Informer] = {
            NODES: informers.subscribe(NODES, nodes),
            PODS: informers.subscribe(
                PODS, _BoundPodCapacity(self._capacity, config, self._listed)
            ),
        }
        if self.devices is not None:
            for store in self.devices.stores:
                self._informers[store.resource] = informers.subscribe(store.resource, store)
        # The same Pod informer: the members of pod-based gangs need no watch of their own.
        informers.subscribe(PODS, self._members)
        self._owners: dict[tuple[str, str], list[_Owners]] = {}
        for resource in owners if owners is not None else owner_resources():
            cache = _Owners(resource, self._listed)
            self._informers[resource] = informers.subscribe(resource, cache)
            self._owners.setdefault((resource.group, resource.kind), []).append(cache)
        self._misses: dict[tuple[str, str, str, str], float] = {}
        for resource in self._informers:
            self._mark(resource.label, False)

    # -- the ClusterView interface -------------------------------------------------------

    @property
    def capacity(self) -> Capacity:
        return self._capacity

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self._informers.values())

    def siblings(self, namespace: str, gang_name: str) -> Sequence[KubeObject]:
        return self._members.siblings(namespace, gang_name)

    def lookup(self, api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        return self._lookup(api_version, kind, namespace, name, fetch=True)

    def cached(self, api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        """`lookup` from the watch caches alone: where `lookup` would GET the owner,
        raises `OwnerNotCached` instead (the async server then decides in a thread)."""
        return self._lookup(api_version, kind, namespace, name, fetch=False)

    def _lookup(
        self, api_version: str, kind: str, namespace: str, name: str, *, fetch: bool
    ) -> KubeObject | None:
        caches = self._owners.get((_group(api_version), kind), [])
        if not caches:
            return None
        key = caches[0].key(namespace, name)
        for cache in caches:
            found = cache.objects.get(key)
            if found is not None:
                return found
        # Of several versions of a kind, ask the one the API server serves.
        served = [c for c in caches if not self._informers[c.resource].absent]
        if not served or not self._may_fetch(served[0], key):
            return None
        if not fetch:
            raise OwnerNotCached("/".join(key))
        return self._fetch(served[0], key)

    def _may_fetch(self, cache: _Owners, key: tuple[str, str, str, str]) -> bool:
        """Not missed lately, and the kind's watch has listed (else a GET cannot help)."""
        fresh_miss = self._misses.get(key, 0.0) > time.monotonic()
        return not fresh_miss and self._informers[cache.resource].synced.is_set()

    def _fetch(self, cache: _Owners, key: tuple[str, str, str, str]) -> KubeObject | None:
        now = time.monotonic()
        try:
            obj = self._api.get(
                cache.resource.object_path(key[2], key[3]), timeout=self.MISS_TIMEOUT_SECONDS
            )
        except Exception as exc:  # a slow or failing API must not fail the admission
            if len(self._misses) > self.MAX_NEGATIVE_ENTRIES:
                # Forget expired misses so a stream of unknown owners cannot grow memory.
                self._misses = {k: t for k, t in self._misses.items() if t > now}
            self._misses[key] = now + self.NEGATIVE_TTL_SECONDS
            log.info("owner lookup missed", extra={"owner": "/".join(key), "error": str(exc)})
            return None
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
        cache.upsert(obj)
        self._misses.pop(key, None)
        return cache.objects.get(key)

    # -- sync state ----------------------------------------------------------------------

    def _mark(self, label: str, synced: bool) -> None:
        if self._notify is not None:
            self._notify(label, synced)

    def _listed(self, resource: Resource) -> None:
        self._mark(resource.label, True)

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.synced:
                return True
            time.sleep(0.05)
        return self.synced
