"""What the server knows about the cluster: GPU capacity and the owners of pods.

`ClusterView` is the small interface the app asks at admission time:
  - `capacity`: a `gangkeeper.policies.capacity.Capacity` (nodes + bound pods' GPUs);
  - `lookup(api_version, kind, namespace, name)`: an `OwnerLookup` over cached owners;
  - `synced`: every watched resource has been listed at least once.

Two implementations:
  - `StaticClusterView`: nodes from a fleet file (and, optionally, workload manifests as
    owners) — `gangkeeper serve` on a laptop, and the HTTP tests;
  - `WatchClusterView`: list+watch of Nodes, bound pods (their GPU requests, for the
    "does not fit now" warning) and every owner kind a gang is sized from, in background
    threads, with resourceVersion, re-list on 410 Gone, reconnect with capped exponential
    backoff and jitter. An owner CRD that is not installed (404) is skipped and retried
    every few minutes. Admission never waits on the API server in steady state: the
    lookup answers from the cache, and only on a miss (an owner created a moment ago,
    not yet seen by our watch) does it do one direct GET with a short timeout, with a
    negative cache so a burst of pods of one unknown owner costs one call.

May call the Kubernetes API (GET list/watch) and read the fleet/manifest files; never
writes to the cluster and holds no HTTP server.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gangkeeper.policies.capacity import Capacity
from gangkeeper.policies.config import Config
from gangkeeper.policies.errors import PolicyError
from gangkeeper.policies.model import KubeObject
from gangkeeper.policies.podspec import pod_demand

from ..kube.rest import ApiError, Rest

log = logging.getLogger(__name__)


class ClusterView(Protocol):
    @property
    def capacity(self) -> Capacity: ...

    def lookup(self, api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        ...

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
    """A fixed fleet from a file; owners from the given objects. Always synced."""

    def __init__(
        self, nodes: Sequence[KubeObject], config: Config, owners: Sequence[KubeObject] = ()
    ) -> None:
        self._capacity = Capacity.from_nodes(nodes, config)
        self._owners: dict[tuple[str, str, str, str], KubeObject] = {}
        for obj in owners:
            meta = _meta(obj)
            key = _key(
                _group(str(obj.get("apiVersion", ""))),
                str(obj.get("kind", "")),
                str(meta.get("namespace") or ("" if _cluster_scoped(obj) else "default")),
                str(meta.get("name", "")),
            )
            self._owners[key] = obj

    @classmethod
    def from_files(
        cls, nodes_file: Path, config: Config, owner_files: Sequence[Path] = ()
    ) -> StaticClusterView:
        """Read the fleet (and owner manifests); errors name the file and document."""
        from ..cli.manifests_io import load_documents, load_nodes

        owners = [doc.obj for path in owner_files for doc in load_documents(path)]
        return cls(load_nodes(nodes_file), config, owners)

    @property
    def capacity(self) -> Capacity:
        return self._capacity

    def lookup(self, api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        return self._owners.get(_key(_group(api_version), kind, namespace, name)) or (
            self._owners.get(_key(_group(api_version), kind, "", name))
        )

    @property
    def synced(self) -> bool:
        return True


def _cluster_scoped(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") in {r.kind for r in _INTERMEDIATE_OWNERS if not r.namespaced}


# --- watched ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Resource:
    """An API resource the view lists and watches."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    field_selector: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{prefix}/{self.plural}"

    def object_path(self, namespace: str, name: str) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        where = f"/namespaces/{namespace}" if self.namespaced else ""
        return f"{prefix}{where}/{self.plural}/{name}"

    @property
    def label(self) -> str:
        return f"{self.plural}.{self.version}.{self.group}" if self.group else self.plural


NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
#: Only pods that hold GPUs now: bound and not finished. A pod leaving the selector
#: (finishing) arrives as DELETED, which is exactly when its GPUs become free.
BOUND_PODS = Resource(
    "", "v1", "pods", "Pod",
    field_selector="spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed",
)
#: Owners the recognisers follow that no recogniser validates itself.
_INTERMEDIATE_OWNERS: tuple[Resource, ...] = (
    Resource("apps", "v1", "statefulsets", "StatefulSet"),  # LeaderWorkerSet → sts → pod
    Resource("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime"),
    Resource(
        "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime",
        namespaced=False,
    ),
)


def owner_resources() -> tuple[Resource, ...]:
    """Every kind a gang is sized from: each recogniser's rules (all served versions
    tried, an unserved one is simply absent) plus the intermediate owners."""
    from gangkeeper.policies.recognizers.registry import default_registry

    found: dict[tuple[str, str, str], Resource] = {}
    for recognizer in default_registry():
        for rule in recognizer.rules:
            for version in rule.versions:
                resource = Resource(rule.group, version, rule.resource, rule.kind)
                found.setdefault((rule.group, version, rule.resource), resource)
    for resource in _INTERMEDIATE_OWNERS:
        found.setdefault((resource.group, resource.version, resource.plural), resource)
    return tuple(found.values())


class _Gone(Exception):
    """410: our resourceVersion is too old; list again."""


class _Absent(Exception):
    """404 on the collection: the CRD is not installed."""


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    # managedFields is often the largest part of an object and no recogniser reads it.
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


class Transport:
    """The few raw GETs the view makes: `Rest`, the shared JSON client, narrowed.

    Goes under the typed API classes on purpose: they would turn every object into a
    model and back, while the policy wants the API server's JSON as plain dicts.
    Tests replace it with a scripted fake of these two methods.
    """

    def __init__(self, api_client: Any) -> None:
        self._rest = Rest(api_client)

    def get_json(self, path: str, query: Sequence[tuple[str, str]] = (), *, timeout: float) -> Any:
        return self._rest.request("GET", path, query, timeout=timeout)

    def watch_lines(
        self, path: str, query: Sequence[tuple[str, str]], *, timeout: float
    ) -> Iterator[bytes]:
        return self._rest.stream_lines(path, query, timeout=timeout)


Handler = Callable[[str, dict[str, Any]], None]


def _name_key(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name") or "")


def _uid_key(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("uid") or "")


def _namespaced_key(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


class _Watcher(threading.Thread):
    """List, then watch, one resource for ever; hands events to `apply`."""

    #: The API server ends a watch after at most this; we ask for less and re-watch.
    WATCH_SECONDS = 240
    ABSENT_RETRY_SECONDS = 120.0
    MAX_BACKOFF_SECONDS = 30.0

    def __init__(
        self,
        transport: Transport,
        resource: Resource,
        *,
        on_event: Handler,
        key_of: Callable[[Mapping[str, Any]], str],
        on_relist_end: Callable[[set[str]], None],
        on_synced: Callable[[Resource, bool], None],
        stop: threading.Event,
    ) -> None:
        super().__init__(name=f"watch-{resource.label}", daemon=True)
        self.transport = transport
        self.resource = resource
        self.on_event = on_event
        self.key_of = key_of
        self.on_relist_end = on_relist_end
        self.on_synced = on_synced
        self.stop_event = stop
        self.absent = False

    def _query(self, **extra: str) -> list[tuple[str, str]]:
        query = [(k, v) for k, v in extra.items() if v]
        if self.resource.field_selector:
            query.append(("fieldSelector", self.resource.field_selector))
        return query

    def _list(self) -> str:
        """List page by page, applying each object as it comes, then forget the rest.

        Pages are applied as they arrive rather than collected: a relist of 50,000
        pods must not hold them all in memory at once, and owners already cached stay
        answerable during the relist instead of vanishing until it ends.
        """
        seen: set[str] = set()
        token = ""
        while True:
            try:
                page = self.transport.get_json(
                    self.resource.path, self._query(limit="500", **{"continue": token}),
                    timeout=60,
                )
            except ApiError as exc:
                if exc.status == 404:
                    raise _Absent from exc
                if exc.status == 410:  # the continue token expired mid-list
                    seen, token = set(), ""
                    continue
                raise
            for item in page.get("items") or []:
                obj = _slim(item)
                seen.add(self.key_of(obj))
                self.on_event("ADDED", obj)
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                self.on_relist_end(seen)
                return str(meta.get("resourceVersion") or "")

    def _watch(self, resource_version: str) -> str:
        query = self._query(
            watch="true",
            resourceVersion=resource_version,
            allowWatchBookmarks="true",
            timeoutSeconds=str(self.WATCH_SECONDS),
        )
        for line in self.transport.watch_lines(
            self.resource.path, query, timeout=self.WATCH_SECONDS + 30
        ):
            if self.stop_event.is_set():
                break
            event = json.loads(line)
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise _Gone
                raise ApiError(int(obj.get("code") or 500), str(obj.get("message")))
            new_rv = (obj.get("metadata") or {}).get("resourceVersion")
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self.on_event(kind, _slim(obj))
            if new_rv:
                resource_version = str(new_rv)
        return resource_version

    def run(self) -> None:
        backoff = 0.5
        while not self.stop_event.is_set():
            try:
                resource_version = self._list()
                self.absent = False
                self.on_synced(self.resource, True)
                backoff = 0.5
                while not self.stop_event.is_set():
                    resource_version = self._watch(resource_version)
            except _Gone:
                log.info("watch expired, listing again", extra={"resource": self.resource.label})
                continue
            except _Absent:
                # Not installed: nothing to cache, which is a complete (empty) view.
                if not self.absent:
                    log.info("resource not served; will retry",
                             extra={"resource": self.resource.label})
                self.absent = True
                self.on_relist_end(set())
                self.on_synced(self.resource, True)
                self.stop_event.wait(self.ABSENT_RETRY_SECONDS)
            except Exception as exc:
                if self.stop_event.is_set():
                    break
                log.warning(
                    "watch failed; reconnecting",
                    extra={"resource": self.resource.label, "error": str(exc),
                           "retry_seconds": round(backoff, 2)},
                )
                self.stop_event.wait(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, self.MAX_BACKOFF_SECONDS)


class WatchClusterView:
    """Capacity and owners kept current by list+watch; see the module docstring."""

    MISS_TIMEOUT_SECONDS = 0.5
    #: A miss answered "not found" is not asked again for this long.
    NEGATIVE_TTL_SECONDS = 5.0
    MAX_NEGATIVE_ENTRIES = 10_000

    def __init__(
        self,
        api_client: Any,
        config: Config,
        *,
        owners: Sequence[Resource] | None = None,
        on_synced: Callable[[str, bool], None] | None = None,
        transport: Transport | None = None,
    ) -> None:
        # `transport` replaces the HTTP calls in tests of the caching logic.
        self._transport = transport or Transport(api_client)
        self._config = config
        self._capacity = Capacity(config)
        self._owner_resources = tuple(owners) if owners is not None else owner_resources()
        self._by_kind: dict[tuple[str, str], list[Resource]] = {}
        for resource in self._owner_resources:
            self._by_kind.setdefault((resource.group, resource.kind), []).append(resource)
        self._owners: dict[tuple[str, str, str, str], KubeObject] = {}
        self._owner_keys: dict[Resource, set[tuple[str, str, str, str]]] = {}
        self._node_names: set[str] = set()
        self._pod_uids: set[str] = set()
        self._misses: dict[tuple[str, str, str, str], float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._synced: dict[Resource, bool] = {}
        self._notify = on_synced
        self._watchers: list[_Watcher] = []

    # -- the ClusterView interface -------------------------------------------------------

    @property
    def capacity(self) -> Capacity:
        return self._capacity

    @property
    def synced(self) -> bool:
        resources = (NODES, BOUND_PODS, *self._owner_resources)
        return all(self._synced.get(r, False) for r in resources)

    def sync_state(self) -> dict[str, bool]:
        return {r.label: self._synced.get(r, False) for r in (NODES, BOUND_PODS,
                                                            *self._owner_resources)}

    def lookup(self, api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        group = _group(api_version)
        candidates = self._by_kind.get((group, kind), [])
        namespaced = not candidates or candidates[0].namespaced
        key = _key(group, kind, namespace if namespaced else "", name)
        found = self._owners.get(key)
        if found is not None or not candidates:
            return found
        # Of several versions of a kind, ask the one the API server serves.
        served = [r for r in candidates if not self._absent(r)]
        return self._fetch(served[0], key) if served else None

    def _absent(self, resource: Resource) -> bool:
        return any(w.absent for w in self._watchers if w.resource == resource)

    def _fetch(self, resource: Resource, key: tuple[str, str, str, str]) -> KubeObject | None:
        now = time.monotonic()
        if self._misses.get(key, 0.0) > now or not self._synced.get(resource, False):
            return None
        try:
            obj = self._transport.get_json(
                resource.object_path(key[2], key[3]), timeout=self.MISS_TIMEOUT_SECONDS
            )
        except Exception as exc:  # a slow or failing API must not fail the admission
            if len(self._misses) > self.MAX_NEGATIVE_ENTRIES:
                # Forget expired misses so a stream of unknown owners cannot grow memory.
                self._misses = {k: t for k, t in self._misses.items() if t > now}
            self._misses[key] = now + self.NEGATIVE_TTL_SECONDS
            log.info("owner lookup missed", extra={"owner": "/".join(key), "error": str(exc)})
            return None
        self._store_owner(resource, "ADDED", _slim(obj))
        return self._owners.get(key)

    # -- applying events -----------------------------------------------------------------

    def _mark(self, resource: Resource, synced: bool) -> None:
        self._synced[resource] = synced
        if self._notify is not None:
            self._notify(resource.label, synced)

    def _store_owner(self, resource: Resource, kind: str, obj: dict[str, Any]) -> None:
        meta = _meta(obj)
        key = _key(resource.group, resource.kind,
                   str(meta.get("namespace") or "") if resource.namespaced else "",
                   str(meta.get("name") or ""))
        with self._lock:
            keys = self._owner_keys.setdefault(resource, set())
            if kind == "DELETED":
                self._owners.pop(key, None)
                keys.discard(key)
            else:
                self._owners[key] = obj
                keys.add(key)
                self._misses.pop(key, None)

    def _prune_owners(self, resource: Resource, seen: set[str]) -> None:
        with self._lock:
            keys = self._owner_keys.get(resource, set())
            for key in [k for k in keys if f"{k[2]}/{k[3]}" not in seen]:
                self._owners.pop(key, None)
                keys.discard(key)

    def _node_event(self, kind: str, node: dict[str, Any]) -> None:
        name = str(_meta(node).get("name") or "")
        if kind == "DELETED":
            self._capacity.delete_node(name)
            self._node_names.discard(name)
            return
        try:
            self._capacity.upsert_node(node)
            self._node_names.add(name)
        except PolicyError as exc:
            # One malformed Node must not blind the view to all the others.
            self._capacity.delete_node(name)
            log.warning("node ignored", extra={"node": name, "error": str(exc)})

    def _prune_nodes(self, seen: set[str]) -> None:
        for gone in self._node_names - seen:
            self._capacity.delete_node(gone)
        self._node_names &= seen

    def _pod_event(self, kind: str, pod: dict[str, Any]) -> None:
        uid = str(_meta(pod).get("uid") or "")
        spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
        assert isinstance(spec, Mapping)
        node = spec.get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if kind == "DELETED" or not node or phase in ("Succeeded", "Failed"):
            self._capacity.remove_pod(uid)
            self._pod_uids.discard(uid)
            return
        try:
            demand = pod_demand(spec, self._config)
        except PolicyError:
            demand = {}
        if demand:
            self._capacity.add_pod(uid, str(node), demand)
            self._pod_uids.add(uid)
        else:
            self._capacity.remove_pod(uid)
            self._pod_uids.discard(uid)

    def _prune_pods(self, seen: set[str]) -> None:
        for gone in self._pod_uids - seen:
            self._capacity.remove_pod(gone)
        self._pod_uids &= seen

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        def watcher(
            resource: Resource,
            on_event: Handler,
            key_of: Callable[[Mapping[str, Any]], str],
            on_relist_end: Callable[[set[str]], None],
        ) -> _Watcher:
            return _Watcher(self._transport, resource, on_event=on_event, key_of=key_of,
                            on_relist_end=on_relist_end, on_synced=self._mark, stop=self._stop)

        self._watchers = [
            watcher(NODES, self._node_event, _name_key, self._prune_nodes),
            watcher(BOUND_PODS, self._pod_event, _uid_key, self._prune_pods),
        ]
        for resource in self._owner_resources:
            self._watchers.append(
                watcher(
                    resource,
                    lambda kind, obj, r=resource: self._store_owner(r, kind, obj),  # type: ignore[misc]
                    _namespaced_key,
                    lambda seen, r=resource: self._prune_owners(r, seen),  # type: ignore[misc]
                )
            )
        for resource in (NODES, BOUND_PODS, *self._owner_resources):
            self._mark(resource, False)
        for w in self._watchers:
            w.start()

    def stop(self) -> None:
        # Watch threads are daemons blocked on a socket read for up to a watch period;
        # they notice the event at the next line or timeout, the process need not wait.
        self._stop.set()

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.synced:
                return True
            time.sleep(0.05)
        return self.synced
