"""Fencing of the controller's writes: a stale leader gets a conflict, not a write.

Leader election gives no fencing by itself (client-go's documentation says so): a
leader paused past its lease wakes up believing it leads, with caches that are old.
Two guards, both needed:
- before a burst, `LeaderElector.confirm()` re-reads the Lease, and before every
  single write `holds()` checks our own monotonic deadline (the controller does both);
- every pod patch carries preconditions the API server checks atomically: a `test`
  of the gate list read (another system's gate is never lost) and a `test` of the
  resourceVersion read, so a patch computed from a stale view fails with 422
  whatever changed meanwhile — gates lifted by the new leader, a placement written.

Pure: JSON patch lists in and out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def guarded(patch: Sequence[dict[str, Any]], resource_version: str) -> list[dict[str, Any]]:
    """`patch`, applied only to the version of the object it was computed from."""
    if not resource_version:
        return list(patch)
    test = {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}
    return [test, *patch]
