"""List + watch one resource into an in-memory store, like client-go's reflector.

`Informer` lists (paginated), remembers the list's resourceVersion, then watches
from it; each event updates the store through a `convert` function (the pod
informer stores `PodInfo`s, not raw pods, and only those that matter). The list is
converted page by page: 50,000 raw pods never sit in memory together, only their
small conversions do (the raw pages were most of the server's peak, and CPython
seldom gives such a peak back to the system). A watch that ends is resumed from the last
resourceVersion seen (bookmarks included); "410 Gone" (the version is too old) means
events were missed, so the informer lists again and replaces the store. Connection
errors back off and retry. `on_change` is called after every change that matters so
the controller can re-plan: an event that leaves the stored value the same (by
`same`, e.g. a status-only update of a pod, or a dropped object staying dropped)
wakes nobody, since each re-plan costs the process CPU that admissions wait for.

I/O (through `Rest`) in a background thread; no decisions here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from .rest import ApiError, Query, Rest

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long one watch request lasts before the server closes it and we resume.
WATCH_SECONDS = 240
#: Objects per list page: bounds the raw JSON held at once during a (re)list.
PAGE_SIZE = 500


def _rv_newer(new: str, old: str) -> bool:
    """Whether `new` is a later version than `old`. The same version is the same
    object state; opaque (non-numeric) versions that differ count as newer."""
    if new.isdigit() and old.isdigit():
        return int(new) > int(old)
    return new != old


class Informer(Generic[T]):
    """A watch-fed store of one resource kind, keyed by uid."""

    def __init__(
        self,
        rest: Rest,
        path: str,
        convert: Callable[[Mapping[str, Any]], T | None],
        on_change: Callable[[], None],
        *,
        query: Query = (),
        name: str = "",
        same: Callable[[T, T], bool] | None = None,
    ) -> None:
        self._rest = rest
        self._path = path
        self._convert = convert
        self._on_change = on_change
        self._same = same or (lambda a, b: a == b)
        self._query = list(query)
        self.name = name or path
        self._lock = threading.Lock()
        self._items: dict[str, T] = {}
        self._versions: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.synced = threading.Event()
        self.relists = 0
        self.resource_version = ""

    # -- store ---------------------------------------------------------------------

    def items(self) -> list[T]:
        with self._lock:
            return list(self._items.values())

    def put(self, obj: Mapping[str, Any]) -> bool:
        """Store an object (from a watch event or a write's answer) unless older.

        Returns whether the store changed in a way `same` does not ignore.
        """
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        version = str(meta.get("resourceVersion", ""))
        with self._lock:
            known = self._versions.get(uid)
        # A version already stored (the watch event of our own write, whose answer was
        # put first) or an older one is not converted at all: conversion is most of
        # the cost. Checked again below, as another thread may store meanwhile.
        if known is not None and not _rv_newer(version, known):
            return False
        value = self._convert(obj)
        with self._lock:
            if uid in self._versions and not _rv_newer(version, self._versions[uid]):
                return False
            old = self._items.get(uid)
            if value is None:
                # Dropped objects keep no version either: only stored objects can be
                # overwritten by a stale copy (a write's answer racing its watch event).
                self._items.pop(uid, None)
                self._versions.pop(uid, None)
                return old is not None
            self._items[uid] = value
            self._versions[uid] = version
            return old is None or not self._same(old, value)

    def _delete(self, obj: Mapping[str, Any]) -> bool:
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        with self._lock:
            self._versions.pop(uid, None)
            return self._items.pop(uid, None) is not None

    # -- loop --------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.name}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _list(self) -> None:
        items: dict[str, T] = {}
        versions: dict[str, str] = {}
        token = ""
        meta: Mapping[str, Any] = {}
        while True:
            query: list[tuple[str, str | int]] = [*self._query, ("limit", PAGE_SIZE)]
            if token:
                query.append(("continue", token))
            try:
                page = self._rest.get(self._path, query)
            except ApiError as err:
                if err.status == 410 and token:
                    # The continue token expired mid-list: start the list over.
                    items, versions, token = {}, {}, ""
                    continue
                raise
            for obj in page.pop("items", None) or []:
                value = self._convert(obj)
                if value is not None:
                    obj_meta = obj.get("metadata") or {}
                    uid = str(obj_meta.get("uid", ""))
                    items[uid] = value
                    versions[uid] = str(obj_meta.get("resourceVersion", ""))
            meta = page.get("metadata") or {}
            token = str(meta.get("continue") or "")
            if not token:
                break
        with self._lock:
            self._items, self._versions = items, versions
        # A paginated list is one consistent snapshot: the last page's version is the
        # list's (and the first page's) resourceVersion.
        self.resource_version = str(meta.get("resourceVersion", ""))
        self.relists += 1
        self.synced.set()
        self._on_change()

    def _watch(self) -> None:
        query = [*self._query, ("resourceVersion", self.resource_version)]
        for event in self._rest.watch(self._path, query, WATCH_SECONDS):
            if self._stop.is_set():
                return
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                code = int(obj.get("code") or 0)
                raise ApiError(code, str(obj.get("reason", "")), str(obj.get("message", "")))
            version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
            if kind == "BOOKMARK":
                self.resource_version = version or self.resource_version
                continue
            changed = self._delete(obj) if kind == "DELETED" else self.put(obj)
            self.resource_version = version or self.resource_version
            if changed:
                self._on_change()

    def _run(self) -> None:
        backoff = 0.2
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                self._watch()
                backoff = 0.2
            except ApiError as err:
                if self._stop.is_set():
                    return
                if err.status == 410:
                    # Our resourceVersion is compacted away: events were lost.
                    log.info("watch %s: %s; listing again", self.name, err)
                    need_list = True
                    continue
                log.warning("watch %s failed: %s; retrying in %.1fs", self.name, err, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            except Exception:  # a dropped stream or a bug must not end the watch thread
                if self._stop.is_set():
                    return
                log.exception("watch %s crashed; listing again", self.name)
                need_list = True
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
