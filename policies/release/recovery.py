"""How to bring a released gang back to all-or-nothing: what to recreate, and how.

Two causes (`watchdog` finds them):
- **rebind**: members released pinned and still unbound after `rebindSeconds` (their
  node's room was taken, or the node went away);
- **not-ready**: a gang bound whole but not all Ready `podsReadyTimeoutSeconds` after
  release (image pull, crash loop), requeued only with `podsReadyRequeue: true`, like
  Kueue's waitForPodsReady.

What is recreated (`rebindScope`, rebind only; not-ready is always the whole gang):
`members` the stuck ones, `gang` every member, `auto` (the default) the stuck ones
unless they would find no room beside the members that stay bound — then only the
whole gang, placed anew, can be all-or-nothing again.

How (`Requeue.how`):
- `suspend`: the gang's owner has `spec.suspend` (`SUSPENDED_OWNERS`: a batch/v1 Job,
  a JobSet, a TrainJob). A pod deleted by anyone but the Job controller counts as a
  failure (`isPodFailed`: a deletionTimestamp on a pod not Succeeded), so with
  `backoffLimit: 0` one delete fails the Job — and a JobSet's child Job, failing the
  JobSet unless its `failurePolicy` restarts it. The owner is suspended instead, as
  Kueue requeues: a suspended JobSet suspends its Jobs (`suspendJobs`, jobset
  v0.11.1 `pkg/controllers/jobset_controller.go`), a suspended TrainJob re-applies its
  JobSet suspended (trainer v2.2.0 `pkg/runtime/framework/plugins/jobset/jobset.go`,
  `Build`), and the Job controller deletes a suspended Job's active pods after
  removing their tracking finalizer, so none counts. The controller resumes the owner
  once they are gone, new pods are created, the webhook gates them, the plan places
  the gang anew. It is always the whole gang (suspension stops every pod).
- `delete`: another owner that recreates deleted pods (LeaderWorkerSet, the
  training-operator kinds): the chosen members are deleted.
- `report`: no owner recreates them (bare pods): an Event and `gangkeeper status` say so.

Bounded: at most `rebindRetries` requeues per gang (the controller counts them).

Pure: `GangObservation`s and the pass's fleet in, frozen values out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ..assigner.assign import Assignment, Member, assign
from ..assigner.pin import unpinned
from ..cluster.fleet import Fleet
from ..cluster.observed_gangs import GangObservation, Owner, PodInfo
from ..recognizers.capabilities import suspended_owners
from ..recognizers.registry import default_registry
from ..settings.config import Config
from .watchdog import Stuck, never_ready, recreates, stuck

Cause = Literal["rebind", "not-ready", "preempted"]
How = Literal["suspend", "delete", "report"]


@dataclass(frozen=True)
class Requeue:
    """One recovery the controller is to perform (if retries are left)."""

    gang: GangObservation
    cause: Cause
    how: How
    #: The members the recovery is about (the stuck ones; the not-Ready ones).
    about: tuple[PodInfo, ...]
    #: The pods to delete (`how == "delete"`); the Job controller deletes them on
    #: `suspend`; none on `report`.
    delete: tuple[PodInfo, ...]
    #: Every member is recreated, not only those `about`.
    whole: bool
    #: Seconds the longest-waiting of `about` has waited since its release.
    waited: float
    #: Why the whole gang (when `whole`): a sentence, "" otherwise.
    why_whole: str = ""


#: Owners requeued by suspension, never by deleting their pods: (apiVersion, kind) to
#: the resource's plural. Each has a boolean `spec.suspend` whose controller deletes
#: the pods itself without counting them as failed (its recogniser says so:
#: `recognizers.base.RequeuesGangs`).
SUSPENDED_OWNERS: Mapping[tuple[str, str], str] = suspended_owners(default_registry())


def owner_kind(gang: GangObservation) -> str:
    """The kind of the gang's owner, for messages ("owner" when it has none)."""
    return gang.owner.kind if gang.owner is not None else "owner"


def suspendable(owner: Owner | None) -> bool:
    """The owner is requeued by suspension (`SUSPENDED_OWNERS`)."""
    return owner is not None and (owner.api_version, owner.kind) in SUSPENDED_OWNERS


def _unpinned(pod: PodInfo) -> Member:
    """The member as it would be recreated: without gangkeeper's pin."""
    return Member(pod.name, pod.requests, unpinned(pod.placement))


def room_beside(stuck: Sequence[PodInfo], fleet: Fleet) -> bool:
    """Could the stuck members be placed anew on what is free now, every other member
    staying where it is? (The fleet counts bound and in-flight pods already.)"""
    return isinstance(assign([_unpinned(p) for p in stuck], fleet.views()), Assignment)


def requeue_how(gang: GangObservation) -> How:
    """How the gang would be requeued whole: its owner suspended, its pods deleted for
    the owner to recreate, or only reported."""
    return _how(gang, recreates(gang))


def _how(gang: GangObservation, recreate: bool) -> How:
    if suspendable(gang.owner):
        return "suspend"
    return "delete" if recreate else "report"


def rebind(found: Stuck, config: Config, room: bool) -> Requeue:
    """The recovery of a gang with stuck members; `room`: `room_beside` answered yes."""
    gang = found.gang
    how = _how(gang, found.recreate)
    why = ""
    if how == "suspend":
        why = (f"a {owner_kind(gang)} is requeued whole (suspended: its deleted pods count "
               "as no failure)")
    elif config.rebind_scope == "gang":
        why = "rebindScope: gang"
    elif config.rebind_scope == "auto" and not room:
        why = "the stuck members have no room beside the members bound"
    whole = bool(why)
    pods = gang.members if whole else found.members
    return Requeue(
        gang=gang,
        cause="rebind",
        how=how,
        about=found.members,
        delete=pods if how == "delete" else (),
        whole=whole,
        waited=found.waited,
        why_whole=why,
    )


def not_ready(gang: GangObservation, now: float, config: Config) -> Requeue | None:
    """The whole-gang requeue of a gang bound but not all Ready in time, when asked
    for (`podsReadyRequeue`) and possible (an owner recreates its pods)."""
    if not config.pods_ready_requeue or not never_ready(gang, now, config):
        return None
    how = requeue_how(gang)
    if how == "report":
        return None  # the GangNotReady Event says it; nothing would recreate the pods
    times = [m.released_at for m in gang.members if m.released_at]
    return Requeue(
        gang=gang,
        cause="not-ready",
        how=how,
        about=tuple(m for m in gang.members if not m.ready),
        delete=gang.members if how == "delete" else (),
        whole=True,
        waited=now - max(times) if times else 0.0,
        why_whole="podsReadyRequeue",
    )


def recover(
    gang: GangObservation, fleet: Fleet, config: Config, now: float
) -> tuple[str, tuple[Requeue, ...]]:
    """A released gang's recoveries, and what `gangkeeper status` says of them ("" when
    there is none)."""
    found = stuck(gang, now, config)
    if found is not None:
        how = _how(gang, found.recreate)
        # The room test costs an assignment: only when its answer is used.
        room = how != "delete" or config.rebind_scope != "auto" or room_beside(
            found.members, fleet
        )
        requeue = rebind(found, config, room)
        what = {
            "suspend": f"its {owner_kind(gang)} is suspended and "
            "resumed for the gang to be placed anew",
            "delete": f"{'the whole gang is' if requeue.whole else 'they are'} deleted "
            "for the owner to recreate",
            "report": "reported",
        }[how]
        return (
            f"{len(found.members)} members pinned but unbound for {int(found.waited)}s "
            f"(their node's room was taken?): {what} (at most rebindRetries times)"
        ), (requeue,)
    late = not_ready(gang, now, config)
    if late is not None:
        return (
            f"bound but {len(late.about)} members not Ready {int(late.waited)}s after "
            "release: requeued whole (podsReadyRequeue, at most rebindRetries times)"
        ), (late,)
    return "", ()
