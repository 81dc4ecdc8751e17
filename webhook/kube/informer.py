"""List + watch, once per resource per process, like client-go's shared informers.

An `Informer` lists one resource page by page, remembers the list's resourceVersion,
then watches from it (with bookmarks) and hands every object, parsed once, to each of
its subscribers. A watch that ends is resumed from the last resourceVersion seen;
"410 Gone" (the version is too old: events were missed) means list again, and every
subscriber is then told which objects the new list holds (`relisted`), so whatever
was deleted meanwhile is forgotten: the resync. Other failures back off (capped,
exponential, with jitter, so replicas do not retry in step) and list again. A
collection that is not served (404: a CRD not installed) is an empty, synced resource,
listed again every few minutes. This is the only module that handles 410 Gone.

Pages are applied as they arrive rather than collected: a relist of 50,000 pods never
holds them all as raw JSON at once, and what subscribers keep stays answerable during
the relist instead of vanishing until it ends.

`Informers` holds one informer per resource for a process: the admission server's
cluster view and the gang controller subscribe to the same ones, so a pod event is
received and parsed once. `Store` is the subscriber most consumers want: a
thread-safe map of converted objects that ignores versions it already holds.

I/O (through an `Api`) in one background thread per resource; no decisions here.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

from gangkeeper.policies.errors import GangkeeperError

from .api import Api, ApiError, Gone, NotFound, Query
from .resources import Resource

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long one watch request lasts before the server closes it and we resume.
WATCH_SECONDS = 240
#: Objects per list page: bounds the raw JSON held at once during a (re)list.
PAGE_SIZE = 500
#: Reconnect backoff: first wait, cap (seconds); each wait is drawn in 0.5-1.5x.
BACKOFF_FIRST, BACKOFF_MAX = 0.2, 10.0
#: A collection the API server does not serve is asked for again after this long.
ABSENT_RETRY_SECONDS = 120.0


def object_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name` ("/name" for cluster-scoped objects): unique in a collection."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _version(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""


def _slim(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    # managedFields is often the largest part of an object and nothing here reads it.
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def is_newer(new: str, old: str) -> bool:
    """Whether `new` is a later version than `old`. The same version is the same
    object state; opaque (non-numeric) versions that differ count as newer."""
    if new.isdigit() and old.isdigit():
        return int(new) > int(old)
    return new != old


class _Restart:
    """`list_pages` yields this when a continue token expired: start over."""


RESTART = _Restart()


def list_pages(
    api: Api, path: str, query: Query = (), page_size: int = PAGE_SIZE
) -> Iterator[Mapping[str, Any] | _Restart]:
    """The pages of a list, following continue tokens.

    A continue token expires (410) when the list takes longer than the server keeps
    its snapshot; the list then starts over, and RESTART says so, so the caller drops
    what it took from the earlier pages.
    """
    token = ""
    while True:
        params: list[tuple[str, str | int]] = [*query, ("limit", page_size)]
        if token:
            params.append(("continue", token))
        try:
            page = api.get(path, params)
        except Gone:
            if not token:
                raise
            token = ""
            yield RESTART
            continue
        yield page
        token = str((page.get("metadata") or {}).get("continue") or "")
        if not token:
            return


def list_all(api: Api, path: str, query: Query = ()) -> list[Mapping[str, Any]]:
    """Every object of a list, read page by page (for one-shot commands)."""
    items: list[Mapping[str, Any]] = []
    for page in list_pages(api, path, query):
        if isinstance(page, _Restart):
            items.clear()
        else:
            items.extend(page.get("items") or [])
    return items


def list_readable(api: Api, path: str, query: Query = ()) -> list[Mapping[str, Any]]:
    """`list_all`, or [] when the resource is not served (404) or this user may not
    list it (403): for what only refines an answer (PodDisruptionBudgets, which only
    preemption's text reads), never for what the answer rests on."""
    try:
        return list_all(api, path, query)
    except ApiError as exc:
        if exc.status in (403, 404):
            return []
        raise


class Subscriber(Protocol):
    """What an informer feeds. Called from the informer's thread, in event order."""

    def upsert(self, obj: Mapping[str, Any]) -> None:
        """An object as listed, added or modified."""
        ...

    def delete(self, obj: Mapping[str, Any]) -> None: ...

    def relisted(self, keys: set[str]) -> None:
        """A (re)list ended and holds exactly these `object_key`s: forget the others."""
        ...


class _Gone(GangkeeperError):
    """410 during a watch: list again."""


class _Absent(GangkeeperError):
    """404 on the collection: it is not served."""


class Informer:
    """List, then watch, one resource for ever, feeding every subscriber."""

    def __init__(self, api: Api, resource: Resource, *, page_size: int = PAGE_SIZE) -> None:
        self._api = api
        self.resource = resource
        self._page_size = page_size
        self._subscribers: list[Subscriber] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Set once the first list (or a 404) is through.
        self.synced = threading.Event()
        #: The collection was not served at the last list.
        self.absent = False
        self.relists = 0
        self.resource_version = ""

    def subscribe(self, subscriber: Subscriber) -> None:
        """Add a subscriber; only before `start`, so none misses the first list."""
        if self._thread is not None:
            raise RuntimeError(f"informer {self.resource.label} already started")
        self._subscribers.append(subscriber)

    # -- loop --------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"informer-{self.resource.label}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def list_once(self) -> None:
        """One complete list, applied page by page, then `relisted` with what it held."""
        seen: set[str] = set()
        meta: Mapping[str, Any] = {}
        try:
            for page in list_pages(self._api, self.resource.path, (), self._page_size):
                if isinstance(page, _Restart):
                    seen = set()
                    continue
                for item in page.get("items") or []:
                    obj = _slim(item)
                    seen.add(object_key(obj))
                    for subscriber in self._subscribers:
                        subscriber.upsert(obj)
                meta = page.get("metadata") or {}
        except NotFound as err:
            raise _Absent from err
        for subscriber in self._subscribers:
            subscriber.relisted(seen)
        # A paginated list is one consistent snapshot: every page carries its version.
        self.resource_version = str(meta.get("resourceVersion") or "")
        self.absent = False
        self.relists += 1
        self.synced.set()

    def watch_once(self) -> None:
        """One watch request from `resource_version`, until the server ends it."""
        query = [("resourceVersion", self.resource_version)]
        try:
            for event in self._api.watch(self.resource.path, query, WATCH_SECONDS):
                if self._stop.is_set():
                    return
                self._apply(event)
        except Gone as err:
            raise _Gone from err

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                raise _Gone
            raise ApiError(code, str(obj.get("reason", "")), str(obj.get("message", "")))
        version = _version(obj)
        if kind in ("ADDED", "MODIFIED"):
            obj = _slim(obj)
            for subscriber in self._subscribers:
                subscriber.upsert(obj)
        elif kind == "DELETED":
            for subscriber in self._subscribers:
                subscriber.delete(obj)
        # BOOKMARK: only its version matters.
        self.resource_version = version or self.resource_version

    def _run(self) -> None:
        backoff = BACKOFF_FIRST
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self.list_once()
                    need_list = False
                    backoff = BACKOFF_FIRST
                self.watch_once()
            except _Gone:
                log.info("watch %s: resourceVersion too old; listing again", self.resource.label)
                need_list = True
            except _Absent:
                if not self.absent:
                    log.info("%s not served; will retry", self.resource.label)
                self.absent = True
                for subscriber in self._subscribers:
                    subscriber.relisted(set())
                self.synced.set()
                self._stop.wait(ABSENT_RETRY_SECONDS)
            except Exception as exc:  # a dropped stream or a bug must not end the thread
                if self._stop.is_set():
                    return
                log.warning(
                    "watch %s failed: %s; listing again in %.1fs",
                    self.resource.label, exc, backoff,
                )
                need_list = True
                self._stop.wait(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, BACKOFF_MAX)


class Informers:
    """One informer per resource for the whole process, started and stopped together."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._by_resource: dict[Resource, Informer] = {}
        self._started = False

    def informer(self, resource: Resource) -> Informer:
        found = self._by_resource.get(resource)
        if found is None:
            found = self._by_resource[resource] = Informer(self.api, resource)
        return found

    def subscribe(self, resource: Resource, subscriber: Subscriber) -> Informer:
        informer = self.informer(resource)
        informer.subscribe(subscriber)
        return informer

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        for informer in self._by_resource.values():
            informer.start()

    def stop(self) -> None:
        for informer in self._by_resource.values():
            informer.stop()
        # Watch threads block in a socket read; closing the streams ends it now.
        self.api.close_all()
        for informer in self._by_resource.values():
            informer.join(2.0)


class Store(Generic[T]):
    """A subscriber that keeps each object converted (`convert`; None drops it).

    A version already stored (the watch event of our own write, whose answer was
    `put` first) or an older one is not converted at all: conversion is most of the
    cost. `on_change` runs after every change that `same` does not call equal, so an
    event that leaves the stored value as it was (a status-only update) wakes nobody.
    `generation` counts those changes: read before `items()`, an unchanged generation
    promises items equal (by `same`) to those of the last time it had that value.
    """

    def __init__(
        self,
        convert: Callable[[Mapping[str, Any]], T | None],
        on_change: Callable[[], None] = lambda: None,
        same: Callable[[T, T], bool] | None = None,
    ) -> None:
        self._convert = convert
        self._on_change = on_change
        self._same = same or (lambda a, b: a == b)
        self._lock = threading.Lock()
        self._items: dict[str, T] = {}
        self._versions: dict[str, str] = {}
        self._generation = 0

    @property
    def generation(self) -> int:
        with self._lock:
            return self._generation

    def items(self) -> list[T]:
        with self._lock:
            return list(self._items.values())

    def put(self, obj: Mapping[str, Any]) -> bool:
        """Store an object (from the informer or a write's answer) unless older.

        Returns whether the store changed in a way `same` does not ignore.
        """
        key, version = object_key(obj), _version(obj)
        with self._lock:
            known = self._versions.get(key)
        if known is not None and not is_newer(version, known):
            return False
        value = self._convert(obj)
        with self._lock:
            # Checked again: another thread may have stored meanwhile.
            if key in self._versions and not is_newer(version, self._versions[key]):
                return False
            old = self._items.get(key)
            if value is None:
                # Dropped objects keep no version either: only stored objects can be
                # overwritten by a stale copy (a write's answer racing its watch event).
                self._items.pop(key, None)
                self._versions.pop(key, None)
                changed = old is not None
            else:
                self._items[key] = value
                self._versions[key] = version
                changed = old is None or not self._same(old, value)
            self._generation += changed
            return changed

    def refresh(self, obj: Mapping[str, Any]) -> bool:
        """Convert `obj` again, though its version is the one stored, because something
        its conversion reads changed elsewhere; stored and signalled as `upsert` would.
        False (nothing done) when another version of it is stored, or none."""
        key, version = object_key(obj), _version(obj)
        with self._lock:
            if self._versions.get(key) != version:
                return False
        value = self._convert(obj)
        with self._lock:
            if self._versions.get(key) != version:
                return False
            old = self._items[key]
            if value is None:
                del self._items[key]
                del self._versions[key]
                changed = True
            else:
                self._items[key] = value
                changed = not self._same(old, value)
            self._generation += changed
        if changed:
            self._on_change()
        return True

    # -- Subscriber ---------------------------------------------------------------------

    def upsert(self, obj: Mapping[str, Any]) -> None:
        if self.put(obj):
            self._on_change()

    def delete(self, obj: Mapping[str, Any]) -> None:
        key = object_key(obj)
        with self._lock:
            self._versions.pop(key, None)
            changed = self._items.pop(key, None) is not None
            self._generation += changed
        if changed:
            self._on_change()

    def relisted(self, keys: set[str]) -> None:
        with self._lock:
            gone = [k for k in self._items if k not in keys]
            for key in gone:
                del self._items[key]
                self._versions.pop(key, None)
            self._generation += bool(gone)
        if gone:
            self._on_change()
