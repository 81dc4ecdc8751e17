"""The controller's decision: which gangs to release now, and why the others wait.

`plan(pods, nodes, config, now)` is one pure pass over everything the API server
holds. It returns the releases to perform (gated members to ungate, and whether a
PodGroup must exist first) and one `GangReport` per gang, which is also what
`gangkeeper status` prints. The rules, in order, for each gang (oldest first):

1. No member carries gangkeeper's gate: released, nothing to do.
2. Some members are ungated and some still gated (a release was interrupted, or a
   member arrived after the release): finish it, whatever the capacity. A gang that
   is partly released is never left that way.
3. A gang that cannot be read (no min-member annotation, unreadable member) waits,
   with the reason.
4. Fewer live members than minMember: waits ("3 of 8 members exist").
5. `coscheduling`, `volcano`, `native`: the group object is ensured, then every gated
   member is released; the scheduler does the all-or-nothing placement.
6. `gate` (stock kube-scheduler): released only when every gated member fits the free
   GPUs now (`policies.feasibility.fits_now`), where "free" already subtracts
   - pods bound to nodes,
   - pods free to schedule but not bound yet (in flight, including the gangs this
     pass releases), placed first-fit on nodes they may use;
   and excludes nodes **held** for an earlier gang. Holding rule: a complete gang that
   does not fit now, but could fit on the empty cluster, holds every node its members
   may use; a later gang may start only if it fits entirely on nodes no earlier
   waiting gang may use. A later gang therefore never takes GPUs an earlier waiting
   gang could use, so backfilling cannot delay it. A gang that can never fit (it
   should have been rejected at admission) holds nothing, so it blocks no one.

Pods that are not gang members are never held by gangkeeper: they use free GPUs like
on any cluster, and the controller counts them as used.

Pure: `PodInfo`s and Node dicts in, frozen dataclasses out. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..capacity import Capacity
from ..config import Config
from ..feasibility import check_gang, fits_now
from ..model import Gang, Placement, Role, Source
from .fleet import Fleet
from .observe import GangObservation, PodInfo, observe_gangs

State = Literal["released", "releasing", "waiting"]
#: Why a gang waits: machine-readable, for metrics and Event reasons.
WaitCode = Literal["", "incomplete", "no-fit", "held", "invalid"]


@dataclass(frozen=True)
class GangReport:
    """One gang as `gangkeeper status` shows it."""

    namespace: str
    name: str
    label: str
    backend: str
    min_member: int | None
    present: int
    gated: int
    bound: int
    state: State
    code: WaitCode
    #: Why it waits (a sentence with numbers), or what is being done.
    reason: str
    #: Seconds since the oldest live member was created.
    age_seconds: float
    #: Creation time (epoch seconds) of the oldest live member: identifies this gang
    #: instance when a gang of the same name comes back later.
    arrived: float
    #: Waiting for longer than `Config.gang_timeout_seconds`.
    stuck: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "gang": self.name,
            "label": self.label,
            "backend": self.backend,
            "minMember": self.min_member,
            "present": self.present,
            "gated": self.gated,
            "bound": self.bound,
            "state": self.state,
            "code": self.code,
            "reason": self.reason,
            "ageSeconds": round(self.age_seconds, 1),
            "stuck": self.stuck,
        }


@dataclass(frozen=True)
class Release:
    """Lift gangkeeper's gate from `pods`; create the group object first if asked."""

    gang: GangObservation
    pods: tuple[PodInfo, ...]
    #: The backend needs a PodGroup (or native group) object before the gates go.
    needs_group: bool


@dataclass(frozen=True)
class Plan:
    releases: tuple[Release, ...]
    reports: tuple[GangReport, ...]


def gang_model(gang: GangObservation, members: Sequence[PodInfo]) -> Gang:
    """The policy core's `Gang` for these members: one role per (role, demand, placement).

    minMember is the number of members: every member to be released must fit.
    """
    groups: dict[tuple[str, tuple[tuple[str, int], ...], Placement], int] = {}
    for member in members:
        key = (member.role or "member", tuple(sorted(member.demand.items())), member.placement)
        groups[key] = groups.get(key, 0) + 1
    roles: list[Role] = []
    seen: dict[str, int] = {}
    for (role, demand, placement), count in groups.items():
        # Role names must be unique; the same role with two shapes gets a suffix.
        seen[role] = seen.get(role, 0) + 1
        name = role if seen[role] == 1 else f"{role}-{seen[role]}"
        roles.append(Role(name=name, count=count, demand=dict(demand), placement=placement))
    owner = gang.owner
    source = (
        Source(owner.api_version, owner.kind, gang.namespace, owner.name, owner.uid)
        if owner is not None
        else Source("v1", "Pod", gang.namespace, members[0].name if members else gang.label)
    )
    return Gang(
        namespace=gang.namespace,
        name=gang.name,
        min_member=len(members),
        roles=tuple(roles),
        source=source,
        recognizer="controller",
    )


def shortfall(gang: GangObservation, members: Sequence[PodInfo], fleet: Fleet) -> str:
    """Why these members do not fit now: 'needs 8 nvidia.com/gpu, 5 free on eligible nodes'."""
    placements = sorted({m.placement for m in members}, key=repr)
    parts: list[str] = []
    short = False
    for resource, need in sorted(gang.total_demand(members).items()):
        free = fleet.free_for(placements, resource)
        short = short or free < need
        parts.append(f"needs {need} {resource}, {free} free on eligible nodes")
    text = "; ".join(parts)
    if not short:
        text += ", but no node has room for a whole member"
    return text


def _release(gang: GangObservation, members: Sequence[PodInfo], fleet: Fleet) -> Release:
    for member in members:
        # Released members will be scheduled soon: count them as using GPUs now.
        if not member.node_name:
            fleet.place(member)
    return Release(gang=gang, pods=tuple(members), needs_group=gang.backend != "gate")


def plan(
    pods: Iterable[PodInfo],
    nodes: Iterable[Mapping[str, Any]],
    config: Config,
    now: float,
) -> Plan:
    """Decide one pass; `pods` are the live pods of the whole cluster."""
    live = list(pods)
    fleet = Fleet(nodes, live, config)
    for pod in sorted((p for p in live if p.in_flight), key=lambda p: (p.created, p.name)):
        fleet.place(pod)
    ever: Capacity | None = None
    holders: dict[str, GangObservation] = {}

    releases: list[Release] = []
    reports: list[GangReport] = []
    for gang in observe_gangs(live, config):
        gated = gang.gated
        state: State = "waiting"
        code: WaitCode = ""
        reason = ""
        if not gated:
            state, reason = "released", "all gates lifted"
        elif len(gated) < gang.present:
            releases.append(_release(gang, gated, fleet))
            state = "releasing"
            reason = (
                f"finishing release: {gang.present - len(gated)} of {gang.present} members "
                "already ungated"
            )
        elif gang.problem:
            code, reason = "invalid", gang.problem
        elif gang.min_member is not None and gang.present < gang.min_member:
            code, reason = "incomplete", f"{gang.present} of {gang.min_member} members exist"
        elif gang.backend != "gate":
            releases.append(_release(gang, gated, fleet))
            state, reason = "releasing", f"{gang.present} members exist; {gang.backend} places them"
        else:
            model = gang_model(gang, gated)
            # fits_now answers True for a capacity with no GPU node at all (admission
            # must not reject blind); holding gates is different: with no node to
            # place them, released members could only sit Pending, or bind piecemeal
            # when nodes appear.
            fits = fleet.capacity.node_count > 0 and fits_now(model, fleet.capacity)
            if not model.total_demand() or fits:
                releases.append(_release(gang, gated, fleet))
                state, reason = "releasing", "all members exist and fit the free GPUs now"
            else:
                code, reason = "no-fit", shortfall(gang, gated, fleet)
                wanted = {m.placement for m in gated}
                held_by = sorted(
                    {
                        f"{holders[n].namespace}/{holders[n].name}"
                        for p in wanted
                        for n in fleet.eligible(p, held=True)
                    }
                )
                if held_by:
                    code = "held"
                    reason += (
                        f"; nodes it may use are held for {', '.join(held_by)}, which came first"
                    )
                if ever is None:
                    ever = Capacity(config)
                    for facts in fleet.nodes.values():
                        ever.upsert_facts(facts)
                if check_gang(model, ever).allowed:
                    for name in fleet.reserve(sorted(wanted, key=repr)):
                        holders[name] = gang
                else:
                    reason += "; it cannot fit even on the empty cluster, so it holds no nodes"
        age = max(0.0, now - gang.arrived) if gang.arrived else 0.0
        reports.append(
            GangReport(
                namespace=gang.namespace,
                name=gang.name,
                label=gang.label,
                backend=gang.backend,
                min_member=gang.min_member,
                present=gang.present,
                gated=len(gated),
                bound=gang.bound,
                state=state,
                code=code,
                reason=reason,
                age_seconds=age,
                arrived=gang.arrived,
                stuck=state == "waiting" and age >= config.gang_timeout_seconds,
            )
        )
    return Plan(releases=tuple(releases), reports=tuple(reports))

