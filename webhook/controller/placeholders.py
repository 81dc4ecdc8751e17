"""The placeholder writes: create, delete, and the Events that say what happened.

The plan (`policies.autoscaling.asking`, through `release.plan`) says which
placeholder pods each waiting gang should have; `PlaceholderWriter` makes it so, as
leader only:

- **create** one placeholder per member named in an `Ask`: the member is read once
  (GET) for its full spec, and `placeholder_pod` copies what the autoscaler and the
  scheduler need. "Already exists" is fine (deterministic names: a restarted
  controller adopts what its predecessor made). A refusal by the API server — a
  ResourceQuota that cannot hold the placeholders on top of the gated members, a
  missing PriorityClass — becomes one Event per gang and cause, with the server's
  message.
- **delete** (grace 0, guarded by the uid read) placeholders of members that have
  room now, of asks that timed out, of gangs released this pass (before their gates
  go: `delete_for_releases`), and orphans (gang gone or not asking).
- **timeouts**: an Event ("2 of 4 members' nodes came in 600 s") and the gang's
  backoff, which the next passes give to `plan()`. The backoff lives in this process
  only: a new leader asks again at once, which costs one more ask, never a leak.
- **preemption**: a placeholder that disappears (or starts terminating) without this
  process deleting it was preempted or removed by someone else: an Event says so, and
  the next pass asks again for the member it held room for.

May do API I/O (pods, events); decides nothing itself.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import wait

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.autoscaling.asking import Ask, gang_key
from gangkeeper.policies.autoscaling.placeholders import placeholder_pod
from gangkeeper.policies.cluster.observed_gangs import GangObservation, PodInfo
from gangkeeper.policies.release.results import Plan, Release

from ..kube.api import ApiError, Conflict, NotFound
from .capacity_writer import CapacityWriter
from .writes import delete_options

log = logging.getLogger(__name__)

#: Events per gang go to its owner and at most this many member pods.
EVENT_POD_LIMIT = 20


def _pod_path(namespace: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{namespace}/pods"
    return f"{base}/{name}" if name else base


def gang_targets(gang: GangObservation) -> list[dict[str, str]]:
    """Where a gang's Events go: its owner, then its first members."""
    targets: list[dict[str, str]] = []
    owner = gang.owner
    if owner is not None:
        targets.append({"apiVersion": owner.api_version, "kind": owner.kind,
                        "name": owner.name, "uid": owner.uid, "namespace": gang.namespace})
    for member in gang.members[:EVENT_POD_LIMIT]:
        targets.append({"apiVersion": "v1", "kind": "Pod", "name": member.name,
                        "uid": member.uid, "namespace": member.namespace})
    return targets


class PlaceholderWriter(CapacityWriter):
    """Carries out a plan's placeholder decisions; see the module docstring."""

    def _init_state(self) -> None:
        #: (namespace, gang label, arrival) → (asks timed out, epoch of the next ask).
        self.backoff: dict[tuple[str, str, float], tuple[int, float]] = {}
        #: uid → (namespace, gang label, name) of the placeholders seen last pass.
        self._seen: dict[str, tuple[str, str, str]] = {}
        #: uids this process deleted (so their disappearance is no preemption).
        self._deleted: set[str] = set()
        #: (namespace, gang label, arrival, cause) already reported by an Event.
        self._refused: set[tuple[str, str, float, str]] = set()

    # -- one pass -------------------------------------------------------------------------

    def apply(self, result: Plan, pods: Iterable[PodInfo]) -> None:
        """Create and delete what the plan says; report timeouts and preemptions."""
        self._notice_preemptions(pods, gangs_by_key(result))
        deletions: list[PodInfo] = list(result.orphans)
        creations: list[tuple[Ask, PodInfo]] = []
        for ask in result.asks:
            deletions.extend(ask.delete)
            creations.extend((ask, member) for member in ask.create)
            if ask.timed_out:
                self._timed_out(ask)
        self._delete_all(deletions)
        pool = self._pool()
        wait([pool.submit(self._create, ask, member) for ask, member in creations])
        present = {(r.namespace, r.label, r.arrived) for r in result.reports}
        self.backoff = {k: v for k, v in self.backoff.items() if k in present}

    def delete_for_releases(self, releases: Sequence[Release]) -> None:
        """Delete the placeholders of gangs about to be released (before their gates go,
        so the scheduler sees the room free when the members arrive)."""
        self._delete_all([p for r in releases for p in r.placeholders])

    # -- writes --------------------------------------------------------------------------------

    def _delete_all(self, pods: Sequence[PodInfo]) -> None:
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
        for target in gang_targets(gang):
            self._emit(target, cat.GANG_PLACEHOLDERS_REFUSED, note)

    def _timed_out(self, ask: Ask) -> None:
        self.backoff[gang_key(ask.gang)] = (ask.attempts, ask.retry_at)
        self._count(cat.PROVISIONING_TIMEOUTS)
        note = f"gang {ask.gang.namespace}/{ask.gang.name}: {ask.timed_out}"
        log.warning("%s", note)
        for target in gang_targets(ask.gang):
            self._emit(target, cat.GANG_PROVISIONING_TIMED_OUT, note)

    def _notice_preemptions(
        self, pods: Iterable[PodInfo], gangs: Mapping[tuple[str, str], GangObservation]
    ) -> None:
        now: dict[str, tuple[str, str, str]] = {}
        terminating: set[str] = set()
        for pod in pods:
            if pod.placeholder_for:
                now[pod.uid] = (pod.namespace, pod.placeholder_for, pod.name)
                if pod.deleting:
                    terminating.add(pod.uid)
        gone = [uid for uid in self._seen if uid not in now or uid in terminating]
        for uid in gone:
            if uid in self._deleted:
                continue
            namespace, label, name = self._seen[uid]
            gang = gangs.get((namespace, label))
            self._count(cat.PLACEHOLDERS_PREEMPTED)
            if gang is None:
                continue
            note = (
                f"placeholder {name} of gang {namespace}/{gang.name} was preempted or deleted "
                "by someone else; asking the autoscaler again"
            )
            log.info("%s", note)
            for target in gang_targets(gang):
                self._emit(target, cat.GANG_PLACEHOLDER_PREEMPTED, note)
        self._seen = {uid: v for uid, v in now.items() if uid not in terminating}
        self._deleted &= set(now)


def gangs_by_key(result: Plan) -> dict[tuple[str, str], GangObservation]:
    """The gangs of a plan's asks and releases, by (namespace, label): those whose
    placeholders can have been preempted since the last pass."""
    out: dict[tuple[str, str], GangObservation] = {}
    for ask in result.asks:
        out[ask.gang.key] = ask.gang
    for release in result.releases:
        out[release.gang.key] = release.gang
    return out
