"""The placeholder writes: create, delete, and the Events that say what happened.

The plan (`policies.autoscaling.asking`, through `release.plan`) says which
placeholder pods each waiting gang should have, and
`policies.release.placeholder_actions` what else the pass does about them (timed-out
asks: an Event and the gang's backoff; placeholders gone without this process
deleting them: an Event); `PlaceholderWriter` sends it, as leader only, and keeps the
memory those decisions need (the backoff, which the next passes give to `plan()`;
the placeholders seen; the uids it deleted):

- **create** one placeholder per member named in an `Ask`: the member is read once
  (GET) for its full spec, and `placeholder_pod` copies what the autoscaler and the
  scheduler need. "Already exists" is fine (deterministic names: a restarted
  controller adopts what its predecessor made). A refusal by the API server — a
  ResourceQuota that cannot hold the placeholders on top of the gated members, a
  missing PriorityClass — becomes one Event per gang and cause, with the server's
  message (a result of the write, remembered here).
- **delete** (grace 0, guarded by the uid read) placeholders of members that have
  room now, of asks that timed out, of gangs released this pass (before their gates
  go: the `releaser` asks), and orphans (gang gone or not asking).

May do API I/O (pods, events); decides nothing itself.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from concurrent.futures import wait

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.autoscaling.asking import Ask, Backoff, gang_key
from gangkeeper.policies.autoscaling.placeholders import placeholder_pod
from gangkeeper.policies.cluster.observed_gangs import GangObservation, PodInfo
from gangkeeper.policies.release.gang_events import Event
from gangkeeper.policies.release.placeholder_actions import (
    PlaceholderActions,
    PlaceholderMemory,
    gang_targets,
    placeholder_actions,
)
from gangkeeper.policies.release.results import Plan

from ..kube.api import ApiError, Conflict, NotFound
from .capacity_writer import CapacityWriter
from .writes import delete_options

log = logging.getLogger(__name__)


def _pod_path(namespace: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{namespace}/pods"
    return f"{base}/{name}" if name else base


class PlaceholderWriter(CapacityWriter):
    """Carries out a plan's placeholder decisions; see the module docstring."""

    def _init_state(self) -> None:
        #: What the placeholder decisions remember between passes.
        self.memory = PlaceholderMemory()
        #: uids this process deleted (so their disappearance is no preemption).
        self._deleted: set[str] = set()
        #: (namespace, gang label, arrival, cause) already reported by an Event.
        self._refused: set[tuple[str, str, float, str]] = set()

    @property
    def backoff(self) -> Backoff:
        """The gangs' timed-out asks, for the next `plan()`."""
        return self.memory.backoff

    # -- one pass -------------------------------------------------------------------------

    def actions(self, result: Plan, pods: Iterable[PodInfo]) -> PlaceholderActions:
        """This pass's decisions (`placeholder_actions`) from the memory kept here."""
        return placeholder_actions(result, pods, self.memory, frozenset(self._deleted))

    def send(self, actions: PlaceholderActions) -> None:
        """Send what `actions` says; keep its memory."""
        self.memory = actions.memory
        self._deleted &= actions.deleted
        for family, labels, value in actions.counts:
            self._count(family, labels, value)
        for event in actions.events:
            log.log(logging.WARNING if event.reason == cat.GANG_PROVISIONING_TIMED_OUT
                    else logging.INFO, "%s", event.note)
            self._emit(event)
        self.delete(actions.deletes)
        pool = self._pool()
        wait([pool.submit(self._create, ask, member) for ask, member in actions.creates])

    # -- writes --------------------------------------------------------------------------------

    def delete(self, pods: Sequence[PodInfo]) -> None:
        """Delete these placeholders (grace 0, guarded by the uid read) and wait."""
        if not pods:
            return
        pool = self._pool()
        wait([pool.submit(self._delete, pod) for pod in pods])

    def _delete(self, pod: PodInfo) -> None:
        if not self._may_write():
            return
        self._deleted.add(pod.uid)
        try:
            self._rest.request("DELETE", _pod_path(pod.namespace, pod.name), self._query,
                               body=delete_options(pod.uid, grace_seconds=0))
        except (NotFound, Conflict):
            return  # gone already, or another pod of that name
        except ApiError as err:
            log.warning("deleting placeholder %s/%s: %s", pod.namespace, pod.name, err)
            return
        self._count(cat.PLACEHOLDERS_DELETED)

    def _create(self, ask: Ask, member: PodInfo) -> None:
        gang = ask.gang
        if not self._may_write():
            return
        try:
            raw = self._rest.get(_pod_path(member.namespace, member.name))
        except NotFound:
            return  # the member is gone: the next pass decides again
        except ApiError as err:
            log.warning("reading member %s/%s: %s", member.namespace, member.name, err)
            return
        owner = gang.owner.reference() if gang.owner is not None else None
        body = placeholder_pod(raw, gang.label, self._config.autoscaling, owner)
        try:
            self._rest.request("POST", _pod_path(member.namespace), self._query, body=body)
        except Conflict:
            return  # made by a previous leader (or a pass ago): adopted
        except ApiError as err:
            self._refused_event(gang, err)
            return
        self._count(cat.PLACEHOLDERS_CREATED)
        name = body["metadata"]["name"]
        log.info("placeholder %s/%s for gang %s", member.namespace, name, gang.name)

    # -- Events ----------------------------------------------------------------------------

    def _refused_event(self, gang: GangObservation, err: ApiError) -> None:
        cause = "quota" if "quota" in str(err).lower() else str(err.status)
        key = (*gang_key(gang), cause)
        self._count(cat.PLACEHOLDER_ERRORS, (("cause", cause),))
        if key in self._refused:
            return
        self._refused.add(key)
        note = (
            f"gang {gang.namespace}/{gang.name} waits for nodes, but its placeholder pods "
            f"were refused, so no autoscaler is asked: {err}"
        )
        log.warning("%s", note)
        self._emit(Event(gang_targets(gang), cat.GANG_PLACEHOLDERS_REFUSED, note))
