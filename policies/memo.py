"""`BoundedMemo`: the one way gangkeeper remembers answers between calls.

A thread-safe map of at most `size` entries that drops the least recently used one
when full, so no stream of new keys (pods, owners, gangs, capacity versions) can grow
memory without bound. Each memo instance belongs to an object with a lifetime: the
server's `Memos` (decision.py) for plans and owners' gangs, each `Capacity` for
feasibility answers, the controller for the pod facts it shares. Nothing here is a
module-level cache. Callers that key by identity keep the object in the value, so
its id cannot be reused while the entry lives.

Pure memory: no I/O.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    """At most `size` answers by key, least recently used dropped first."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a memo must hold at least one entry, got {size}")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def share(self, key: K, value: V) -> V:
        """The value already remembered for `key`, else `value`, now remembered."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
            self._entries[key] = value
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)
            return value

    def __len__(self) -> int:
        return len(self._entries)
