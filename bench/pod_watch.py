"""One raw watch of a namespace's pods, stamping when this process saw each change.

`Observer` remembers, per pod name, when it was first seen, first seen without a given
scheduling gate, and first seen bound (`time.monotonic()` of this process: a few
milliseconds after the API server made the change, the same delay for every stamp).
A `listener` gets each added or modified pod as it arrives, in the watch's thread (the
load benchmark's baseline releases gangs from it). A watch the API server ends with an
error (410 Gone: its window passed) is started again from a fresh resourceVersion;
changes in that gap carry no stamp, and `gaps` counts such restarts.

Used by `bench.controller` and `bench.load`. Reads the namespace's pods only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from gangkeeper.policies.names import GATE

Listener = Callable[[Mapping[str, Any]], None]


class Observer:
    """Watches the namespace; remembers when each pod was first seen, seen ungated
    (without `gate`) and bound."""

    def __init__(
        self, rest: Any, resource_version: str, namespace: str, *, gate: str = GATE,
        listener: Listener | None = None,
    ) -> None:
        self.rest = rest
        self.since = resource_version
        self.namespace = namespace
        self.gate = gate
        self.listener = listener
        self.seen: dict[str, float] = {}
        self.ungated: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.gaps = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        version = self.since
        while not self.stop.is_set():
            for event in self.rest.watch(path, [("resourceVersion", version)], 60):
                now = time.monotonic()
                obj = event.get("object") or {}
                meta = obj.get("metadata") or {}
                if event.get("type") == "ERROR":
                    self.gaps += 1
                    version = str(self.rest.get(path, [("limit", 1)])["metadata"]
                                  ["resourceVersion"])
                    break
                version = str(meta.get("resourceVersion") or version)
                if event.get("type") not in ("ADDED", "MODIFIED"):
                    continue
                name = str(meta.get("name"))
                spec = obj.get("spec") or {}
                self.seen.setdefault(name, now)
                gates = [g.get("name") for g in spec.get("schedulingGates") or []]
                if self.gate not in gates:
                    self.ungated.setdefault(name, now)
                if spec.get("nodeName"):
                    self.bound.setdefault(name, now)
                if self.listener is not None:
                    self.listener(obj)
                if self.stop.is_set():
                    return
