"""`BoundedMemo` and `IdentityMemo`: the one way gangkeeper remembers answers.

A `BoundedMemo` is a thread-safe map of at most `size` entries that drops the least
recently used one when full, so no stream of new keys (pods, owners, gangs, capacity
versions) can grow memory without bound. An `IdentityMemo` is a `BoundedMemo` of
answers about objects by identity (plus a key): the object is kept in its entry, so
its id cannot be reused by another object while the entry lives, and a hit is only
ever for that very object.

Each memo instance belongs to an object with a lifetime, which states its bound: the
server's `Memos` (admission/decision.py) for plans and owners' gangs, each `Capacity` for
feasibility answers, the controller's `SharedParts` for the pod facts it shares, and
one recogniser call (`recognizers.common.one_call`, `registry._memoised`) for what
its recognisers read twice. One memo lives at module level, on purpose: the compiled
CEL programs of DeviceClass selectors (`dra/classes.py`), keyed by the expression text
alone, so every caller would get the same answer from its own. No `functools.cache`
either: a test checks both.

Pure memory: no I/O.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from enum import Enum
from typing import Final, Generic, Literal, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Missing(Enum):
    MISSING = "missing"


#: What `lookup` answers for a key not remembered (a remembered None is None).
MISSING: Final = _Missing.MISSING
Missing = Literal[_Missing.MISSING]


class BoundedMemo(Generic[K, V]):
    """At most `size` answers by key, least recently used dropped first."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a memo must hold at least one entry, got {size}")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def lookup(self, key: K) -> V | Missing:
        """The answer remembered for `key` (now the most recently used), or MISSING."""
        with self._lock:
            value = self._entries.get(key, MISSING)
            if value is not MISSING:
                self._entries.move_to_end(key)
            return value

    def get(self, key: K) -> V | None:
        """The answer remembered for `key`, or None (for memos that never hold None)."""
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
            found = self._entries.get(key, MISSING)
            if found is not MISSING:
                self._entries.move_to_end(key)
                return found
            self._entries[key] = value
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)
            return value

    def __len__(self) -> int:
        return len(self._entries)


class IdentityMemo(Generic[K, V]):
    """At most `size` answers about objects, by `key` and the object's identity (not
    its value: the answers are about one object, which may be unhashable or change
    its value only by being replaced); least recently used dropped first."""

    def __init__(self, size: int) -> None:
        self._entries: BoundedMemo[tuple[K, int], tuple[object, V]] = BoundedMemo(size)

    @property
    def size(self) -> int:
        return self._entries.size

    def lookup(self, key: K, obj: object) -> V | Missing:
        """The answer remembered for `key` about this very `obj`, or MISSING."""
        hit = self._entries.get((key, id(obj)))
        return hit[1] if hit is not None and hit[0] is obj else MISSING

    def put(self, key: K, obj: object, value: V) -> None:
        # The object is kept in the entry, so its id cannot be reused while it lives.
        self._entries.put((key, id(obj)), (obj, value))

    def __len__(self) -> int:
        return len(self._entries)
