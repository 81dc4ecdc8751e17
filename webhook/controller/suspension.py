"""Requeue a gang by suspending its owner and resuming it (Kueue's way).

A pod deleted by anyone but the Job controller counts as a failed pod (kubernetes
`pkg/controller/job`, `isPodFailed`: a deletionTimestamp on a pod not Succeeded), so
the watchdog's delete of a stuck member would fail a Job with `backoffLimit: 0`, and
with it a JobSet or TrainJob built on such Jobs. A suspended Job's active pods are
deleted by the Job controller itself, which removes their tracking finalizer first
(`deleteJobPods`), so none of them counts; a suspended JobSet suspends its Jobs, and
a suspended TrainJob its JobSet (`policies.release.recovery.SUSPENDED_OWNERS`).

`suspend(namespace, owner, requeues_left)` reads the owner (its requeue count is the
annotation `gangkeeper.io/requeues`, so every leader sees the same count) and patches
`spec.suspend: true` with the label `gangkeeper.io/requeue: suspended`, testing the
uid and resourceVersion it read. `resume(uids)` patches `spec.suspend: false` (and
drops the label) of the owners `release.watchdog_actions.to_resume` chose from
`held()` (no pod of the owner left in the controller's cache, or
`RESUME_AFTER_SECONDS` after the suspension whatever is left: an owner is never left
suspended). A new leader `adopt()`s the
owners labelled suspended (one list per kind; a kind whose CRD is not installed is
skipped), so a leader change between suspend and resume leaves none behind.

May do API I/O (get, list, patch on the owners of `SUSPENDED_OWNERS`); decides
nothing about gangs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from gangkeeper.policies.cluster.observed_gangs import Owner
from gangkeeper.policies.names import REQUEUE_LABEL, REQUEUE_SUSPENDED, REQUEUES_ANNOTATION
from gangkeeper.policies.release.recovery import SUSPENDED_OWNERS

from ..kube.api import Api, ApiError, Conflict, Invalid, NotFound
from ..kube.resources import Resource
from .writes import WRITE_QUERY, resume_patch, suspend_patch

log = logging.getLogger(__name__)

def _resource(api_version: str, kind: str, plural: str) -> Resource:
    group, _, version = api_version.rpartition("/")
    return Resource(group, version, plural, kind)


#: The suspendable owners' resources, by (apiVersion, kind).
RESOURCES: dict[tuple[str, str], Resource] = {
    key: _resource(*key, plural) for key, plural in SUSPENDED_OWNERS.items()
}

Outcome = Literal["suspended", "spent", "busy", "gone", "fenced", "error"]


@dataclass(frozen=True)
class Suspended:
    resource: Resource
    namespace: str
    name: str
    uid: str
    #: When it was suspended (or adopted), epoch seconds.
    since: float

    @property
    def path(self) -> str:
        return self.resource.object_path(self.namespace, self.name)


def requeue_count(owner: dict[str, Any]) -> int:
    raw = ((owner.get("metadata") or {}).get("annotations") or {}).get(REQUEUES_ANNOTATION, "0")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else 0


class SuspendRequeuer:
    """Suspends and resumes gangs' owners for the watchdog; see the module docstring."""

    def __init__(self, rest: Api, may_write: Callable[[], bool]) -> None:
        self.rest = rest
        self._may_write = may_write
        #: (kind, namespace, name) -> the owner suspended and not yet resumed.
        self.suspended: dict[tuple[str, str, str], Suspended] = {}
        self._adopted = False

    def elected(self) -> None:
        """A new term: look for owners a previous leader left suspended, at the next pass."""
        self._adopted = False

    def busy(self, owner: Owner | None) -> bool:
        """A requeue of this owner is under way (suspended, not yet resumed)."""
        return owner is not None and any(s.uid == owner.uid for s in self.suspended.values())

    def suspend(
        self, namespace: str, owner: Owner, retries: int, now: float
    ) -> tuple[Outcome, int]:
        """Suspend the owner unless `retries` requeues were spent; (outcome, requeue number)."""
        resource = RESOURCES.get((owner.api_version, owner.kind))
        if resource is None:
            return "gone", 0  # not suspendable: the recovery plan never asks it
        path = resource.object_path(namespace, owner.name)
        try:
            found = self.rest.get(path)
        except NotFound:
            return "gone", 0
        except ApiError:
            return "error", 0
        meta = found.get("metadata") or {}
        done = requeue_count(found)
        if meta.get("uid") != owner.uid:
            return "gone", done
        if (found.get("spec") or {}).get("suspend"):
            if (meta.get("labels") or {}).get(REQUEUE_LABEL) == REQUEUE_SUSPENDED:
                self._track(resource, namespace, owner.name, owner.uid, now)
            return "busy", done  # ours under way, or suspended by its user or Kueue
        if done >= retries:
            return "spent", done
        if not self._may_write():
            return "fenced", done
        try:
            self.rest.request(
                "PATCH", path, WRITE_QUERY, body=suspend_patch(found, done + 1),
                content_type="application/json-patch+json",
            )
        except (NotFound, Conflict, Invalid):
            # 422: a test failed (the owner changed since it was read), or its
            # validating webhook refused: the next pass decides again.
            return "error", done
        except ApiError as err:
            log.warning("suspending %s %s/%s: %s", owner.kind, namespace, owner.name, err)
            return "error", done
        self._track(resource, namespace, owner.name, owner.uid, now)
        return "suspended", done + 1

    def _track(self, resource: Resource, namespace: str, name: str, uid: str,
               now: float) -> None:
        self.suspended.setdefault(
            (resource.kind, namespace, name), Suspended(resource, namespace, name, uid, now)
        )

    def adopt(self, now: float) -> None:
        """Once per term: every owner labelled suspended by gangkeeper is ours to resume."""
        if self._adopted:
            return
        selector = (("labelSelector", f"{REQUEUE_LABEL}={REQUEUE_SUSPENDED}"),)
        found: list[tuple[Resource, dict[str, Any]]] = []
        for resource in RESOURCES.values():
            try:
                listed = self.rest.get(resource.path, selector)
            except NotFound:
                continue  # the kind is not installed: nothing of it to resume
            except ApiError as err:
                log.warning("listing %s left suspended: %s", resource.label, err)
                return  # the next pass lists again
            found.extend((resource, item) for item in listed.get("items") or [])
        self._adopted = True
        for resource, item in found:
            meta = item.get("metadata") or {}
            if (meta.get("labels") or {}).get(REQUEUE_LABEL) == REQUEUE_SUSPENDED:
                self._track(resource, str(meta.get("namespace")), str(meta.get("name")),
                            str(meta.get("uid")), now)

    def held(self) -> list[tuple[str, float]]:
        """(uid, suspended since) of the owners held suspended: what `to_resume` reads."""
        return [(s.uid, s.since) for s in self.suspended.values()]

    def resume(self, uids: frozenset[str]) -> None:
        """Resume the owners `uids` (`to_resume` chose them) and forget them; one that
        is gone, or no longer ours, is forgotten too; one that fails stays held."""
        for key, held in list(self.suspended.items()):
            if held.uid not in uids:
                continue
            if not self._may_write():
                return
            path = held.path
            try:
                current = self.rest.get(path)
                if (current.get("metadata") or {}).get("uid") == held.uid:
                    self.rest.request(
                        "PATCH", path, WRITE_QUERY, body=resume_patch(current),
                        content_type="application/json-patch+json",
                    )
            except (NotFound, Invalid):
                pass  # gone, or no longer ours: forget it
            except ApiError as err:
                log.warning("resuming %s %s/%s: %s", held.resource.kind, held.namespace,
                            held.name, err)
                continue
            del self.suspended[key]
