"""`FakeApi`: an in-memory `Api` for tests of everything that reads or writes the API.

It keeps collections of objects with a global resourceVersion, answers lists page by
page (continue tokens), single-object GETs, watches from a resourceVersion (every
event since, then new ones as they happen; "410 Gone" for a version older than the
last `compact()`), and the writes the controller makes (POST, which stamps the
creationTimestamp, PUT with optimistic concurrency, JSON-patch PATCH with `test`
operations, DELETE), each write logged as a watch event. Tests steer it: `seed` and
`forget` change objects without an event (as if the watch missed them), `emit` and
`bookmark` log events, `break_watch` delivers an event or raises in the open stream,
`end_watch` ends it, `compact` makes every older version answer 410, `expire_continue`
cuts a paged list short, `absent` makes a collection unserved (404), `calls` records
every request.

It is not an API server: no admission, no defaulting, no field selectors, no
validation. The end-to-end tests use a real one. In memory only: no I/O.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jsonpatch

from .api import Api, ApiError, Call, Query
from .informer import object_key

#: Queued by `end_watch`: the open watch ends.
_END = object()


def _split(path: str) -> tuple[str, str, str]:
    """(collection path, namespace, name) of an API path; "" where not given.

    The collection path is the one across all namespaces (`/api/v1/pods`), as an
    informer watches it.
    """
    parts = path.strip("/").split("/")
    prefix_len = 2 if parts[0] == "api" else 3
    prefix, rest = parts[:prefix_len], parts[prefix_len:]
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    name = rest[1] if len(rest) > 1 else ""
    return "/" + "/".join([*prefix, rest[0]]), namespace, name


class FakeApi(Api):
    """Collections, a resourceVersion counter, an event log per collection."""

    #: How often a blocked watch looks for new events or a stop.
    POLL_SECONDS = 0.02

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.events: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        #: Queued per collection: an event to deliver or an exception to raise, in
        #: the open watch (or the next one).
        self._injected: dict[str, list[object]] = defaultdict(list)
        #: Collections answered with 404.
        self.absent: set[str] = set()
        #: (method, path, query) of every request, in order.
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        #: Armed by `expire_continue`: called, then the next continue token answers 410.
        self._expiry: Callable[[], None] | None = None
        self.rv = 1
        self._compacted = 0
        self._lock = threading.Condition()
        self._closed = False

    # -- steering ------------------------------------------------------------------------

    def _stamp(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.rv += 1
        stored = copy.deepcopy(dict(obj))
        meta = stored.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.rv)
        meta.setdefault("uid", f"uid-{meta.get('namespace', '')}-{meta.get('name', '')}")
        return stored

    def seed(self, path: str, *objects: Mapping[str, Any]) -> None:
        """Store objects without an event: a list sees them, a running watch does not."""
        with self._lock:
            for obj in objects:
                stored = self._stamp(obj)
                self.objects[path][object_key(stored)] = stored

    def forget(self, path: str, obj: Mapping[str, Any]) -> None:
        """Remove an object without an event (deleted while nobody watched)."""
        with self._lock:
            self.objects[path].pop(object_key(obj), None)

    def emit(self, path: str, kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Apply a change and log its watch event; returns the object as stored."""
        with self._lock:
            stored = self._stamp(obj)
            if kind == "DELETED":
                self.objects[path].pop(object_key(stored), None)
            else:
                self.objects[path][object_key(stored)] = stored
            self.events[path].append((self.rv, {"type": kind, "object": stored}))
            self._lock.notify_all()
            return stored

    def bookmark(self, path: str) -> None:
        with self._lock:
            self.rv += 1
            event = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self.rv)}}}
            self.events[path].append((self.rv, event))
            self._lock.notify_all()

    def break_watch(self, path: str, what: object) -> None:
        """Deliver `what` in the collection's watch: an event dict, or an exception to raise."""
        with self._lock:
            self._injected[path].append(what)
            self._lock.notify_all()

    def end_watch(self, path: str) -> None:
        """End the collection's open watch cleanly, as the server does at its timeout."""
        self.break_watch(path, _END)

    def expire_continue(self, meanwhile: Callable[[], None] = lambda: None) -> None:
        """The next list page asked for by continue token answers 410 (the snapshot
        expired), after `meanwhile` ran (changes made while the list was cut short)."""
        self._expiry = meanwhile

    def compact(self) -> None:
        """Forget the event log: a watch from any version seen so far gets 410 Gone."""
        with self._lock:
            self._compacted = self.rv
            self.events.clear()

    # -- Api -------------------------------------------------------------------------------

    def send(self, call: Call) -> dict[str, Any]:
        method, path, body = call.method, call.path, call.body
        params = dict(call.query)
        self.calls.append((method, path, params))
        collection, namespace, name = _split(path)
        if collection in self.absent:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        with self._lock:
            if method == "GET" and not name:
                return self._list(collection, namespace, params)
            key = f"{namespace}/{name}"
            found = self.objects[collection].get(key)
            if method == "POST" and path.endswith("/eviction"):
                # The Eviction API with no budget in the way: the pod is deleted.
                if found is None:
                    raise ApiError(404, "NotFound", f"{path} not found")
                self._log(collection, "DELETED", found)
                del self.objects[collection][key]
                return {"kind": "Status", "status": "Success"}
            if method == "POST":
                return self._create(collection, namespace, body)
            if found is None:
                raise ApiError(404, "NotFound", f"{path} not found")
            if method == "GET":
                return copy.deepcopy(found)
            if method == "DELETE":
                # DeleteOptions.preconditions, as the API server checks them.
                options = body if isinstance(body, Mapping) else {}
                wanted = options.get("preconditions") or {}
                meta = found.get("metadata") or {}
                for field in ("uid", "resourceVersion"):
                    if wanted.get(field) and meta.get(field) and wanted[field] != meta[field]:
                        raise ApiError(409, "Conflict", f"{path}: precondition {field} failed")
                self._log(collection, "DELETED", found)
                del self.objects[collection][key]
                return copy.deepcopy(found)
            if method == "PUT":
                assert isinstance(body, Mapping)
                wanted = str((body.get("metadata") or {}).get("resourceVersion") or "")
                if wanted and wanted != found["metadata"]["resourceVersion"]:
                    raise ApiError(409, "Conflict", f"{path} was modified")
                return self._replace(collection, key, body)
            if method == "PATCH":
                if isinstance(body, Mapping):  # a merge patch (RFC 7386): the nudges
                    return self._replace(collection, key, _merged(found, body))
                # Otherwise a JSON Patch: a list of operations.
                assert isinstance(body, list), f"PATCH {path}: neither a merge patch nor a list"
                try:
                    patched = jsonpatch.apply_patch(found, body)
                except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                    raise ApiError(422, "Invalid", str(exc)) from exc
                return self._replace(collection, key, patched)
        raise ApiError(405, "MethodNotAllowed", method)

    def _list(self, collection: str, namespace: str, params: Mapping[str, Any]) -> dict[str, Any]:
        token = str(params.get("continue") or "")
        offset, version = 0, self.rv
        if token:
            if self._expiry is not None:
                meanwhile, self._expiry = self._expiry, None
                meanwhile()
                raise ApiError(410, "Expired", "the provided continue parameter is too old")
            listed_at, _, start = token.partition(":")
            offset, version = int(start), int(listed_at)
        items = [
            o for k, o in sorted(self.objects[collection].items())
            if not namespace or k.startswith(f"{namespace}/")
        ]
        limit = int(params.get("limit") or 0) or len(items) or 1
        page = items[offset : offset + limit]
        more = offset + limit < len(items)
        meta: dict[str, Any] = {"resourceVersion": str(version)}
        if more:
            meta["continue"] = f"{version}:{offset + limit}"
        return {"metadata": meta, "items": copy.deepcopy(page)}

    def _create(self, collection: str, namespace: str, body: object) -> dict[str, Any]:
        assert isinstance(body, Mapping)
        obj = copy.deepcopy(dict(body))
        meta = obj.setdefault("metadata", {})
        if namespace:
            meta.setdefault("namespace", namespace)
        if not meta.get("name"):
            meta["name"] = f"{meta.get('generateName', '')}{self.rv + 1}"
        if object_key(obj) in self.objects[collection]:
            raise ApiError(409, "AlreadyExists", f"{meta['name']} already exists")
        # As the API server: the creation time is its own, whatever the body said
        # (the controller's timeouts count from it).
        meta["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        stored = self._stamp(obj)
        self.objects[collection][object_key(stored)] = stored
        self._log(collection, "ADDED", stored)
        return copy.deepcopy(stored)

    def _replace(self, collection: str, key: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        uid = self.objects[collection][key]["metadata"].get("uid")
        stored = self._stamp(obj)
        stored["metadata"]["uid"] = uid
        self.objects[collection][key] = stored
        self._log(collection, "MODIFIED", stored)
        return copy.deepcopy(stored)

    def _log(self, collection: str, kind: str, obj: Mapping[str, Any]) -> None:
        self.events[collection].append((self.rv, {"type": kind, "object": copy.deepcopy(obj)}))
        self._lock.notify_all()

    def watch(self, path: str, query: Query, timeout_seconds: int) -> Iterator[Mapping[str, Any]]:
        params = dict(query)
        self.calls.append(("WATCH", path, params))
        if path in self.absent:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        since = int(str(params.get("resourceVersion") or "0") or "0")
        if since < self._compacted:
            yield {"type": "ERROR", "object": {"kind": "Status", "code": 410,
                                               "reason": "Expired", "message": "too old"}}
            return
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            with self._lock:
                if self._closed:
                    return
                injected = self._injected[path]
                pending = [e for rv, e in self.events[path] if rv > since]
                if not pending and not injected:
                    self._lock.wait(self.POLL_SECONDS)
                    continue
                what = injected.pop(0) if not pending and injected else None
            if what is _END:
                return
            if what is not None:
                if isinstance(what, BaseException):
                    raise what
                assert isinstance(what, Mapping)
                yield copy.deepcopy(dict(what))
                continue
            for event in pending:
                since = int(event["object"]["metadata"]["resourceVersion"])
                yield copy.deepcopy(event)

    def close_all(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()


def _merged(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """`target` with a JSON merge patch applied (RFC 7386): null removes a key, a map
    merges, anything else replaces."""
    out = copy.deepcopy(dict(target))
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
