"""Leader election on a coordination.k8s.io/v1 Lease, decided like client-go's.

`next_lease(...)` is the pure heart of client-go's `tryAcquireOrRenew`: given the
Lease as last read (or None when it does not exist), who we are, the wall clock and
when we last saw the record change, it says whether to create, update or leave the
Lease, and returns the body to write. Expiry is judged on *our* monotonic clock from
the moment we observed the holder's last change, never on the holder's `renewTime`,
so clock skew between replicas cannot make two leaders. Optimistic concurrency comes
from writing back the `resourceVersion` we read: a concurrent writer gets 409.

Pure: no I/O; the controller's I/O loop performs the write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal


def micro_time(wall: float) -> str:
    """metav1.MicroTime as the API server expects it: RFC 3339 with microseconds."""
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Observation:
    """The lease record we last saw, and when (our monotonic clock) it last changed."""

    holder: str
    renew_time: str
    resource_version: str
    seen_at: float


@dataclass(frozen=True)
class LeaseStep:
    """What to do next: `action` and, for create/update, the full body to send."""

    action: Literal["create", "update", "wait"]
    body: dict[str, Any] | None
    observation: Observation | None
    #: Who holds the lease after this step if the write succeeds ("" = nobody).
    holder: str


def _record(lease: Mapping[str, Any]) -> tuple[str, str, int, int, str]:
    spec = lease.get("spec") or {}
    return (
        str(spec.get("holderIdentity") or ""),
        str(spec.get("renewTime") or ""),
        int(spec.get("leaseDurationSeconds") or 0),
        int(spec.get("leaseTransitions") or 0),
        str(spec.get("acquireTime") or ""),
    )


def next_lease(
    lease: Mapping[str, Any] | None,
    *,
    name: str,
    namespace: str,
    identity: str,
    duration_seconds: int,
    wall: float,
    monotonic: float,
    observed: Observation | None,
) -> LeaseStep:
    """One acquire-or-renew decision (client-go leaderelection.tryAcquireOrRenew)."""
    now = micro_time(wall)
    if lease is None:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "holderIdentity": identity,
                "leaseDurationSeconds": duration_seconds,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        return LeaseStep("create", body, None, identity)

    holder, renew_time, held_for, transitions, acquired = _record(lease)
    meta = lease.get("metadata") or {}
    version = str(meta.get("resourceVersion") or "")
    if (
        observed is None
        or observed.holder != holder
        or observed.renew_time != renew_time
    ):
        # The record changed since we last looked: the holder is alive as of now.
        observed = Observation(holder, renew_time, version, monotonic)
    else:
        observed = Observation(holder, renew_time, version, observed.seen_at)

    expired = observed.seen_at + max(held_for, 1) <= monotonic
    if holder and holder != identity and not expired:
        return LeaseStep("wait", None, observed, holder)

    spec: dict[str, Any] = {
        "holderIdentity": identity,
        "leaseDurationSeconds": duration_seconds,
        "renewTime": now,
    }
    if holder == identity:
        spec["acquireTime"] = acquired or now
        spec["leaseTransitions"] = transitions
    else:
        spec["acquireTime"] = now
        spec["leaseTransitions"] = transitions + 1
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": version},
        "spec": spec,
    }
    return LeaseStep("update", body, observed, identity)


def released_lease(lease: Mapping[str, Any], identity: str) -> dict[str, Any] | None:
    """The body that gives the lease up on shutdown (client-go ReleaseOnCancel).

    None when we do not hold it. Keeping the record but clearing the holder and
    shortening the duration lets the next replica take over at once.
    """
    holder, renew_time, _, transitions, acquired = _record(lease)
    if holder != identity:
        return None
    meta = lease.get("metadata") or {}
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "spec": {
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": acquired or None,
            "renewTime": renew_time or None,
            "leaseTransitions": transitions,
        },
    }
