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
4. Fewer live members than minMember: waits ("3 of 8 members exist"). Members that
   arrive only after release (`gangkeeper.io/later-members`: a step that waits for
   another's Ready, JobSet InOrder, LWS LeaderReady workers, JobSet exclusive-placement
   followers) are not waited for: they cannot exist before the release.
5. `coscheduling`, `volcano`, `native`: the group object is ensured, then every gated
   member is released; the scheduler does the all-or-nothing placement.
6. `gate` (stock kube-scheduler): released only when every gated member — and every
   later member still to come — fits the free GPUs now
   (`policies.feasibility.fits_now`). The later members' room stays counted as used
   until they arrive, and a later member of a released gang is released at once
   (rule 2) onto it. Members beyond minMember (an elastic job's, `minAvailable`
   below the replicas) are released as they fit, once minMember of them can be.
   "Free" already subtracts
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
from dataclasses import dataclass, field
from typing import Any, Literal

from ..capacity import Capacity
from ..config import Config
from ..feasibility import check_gang, fits_now
from ..model import Gang, Placement, Role, Source
from .fleet import Fleet
from .observe import GangObservation, LaterMembers, PodInfo, observe_gangs

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


def gang_model(
    gang: GangObservation,
    members: Sequence[PodInfo],
    *,
    later: Sequence[tuple[LaterMembers, int]] = (),
    min_member: int | None = None,
) -> Gang:
    """The policy core's `Gang` for these members: one role per (role, demand, placement),
    plus a role per kind of `later` member still to come.

    minMember is the number of members (later ones included) unless given: every
    member to be released must fit, with room for those to come.
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
    for index, (entry, count) in enumerate(later):
        roles.append(
            Role(f"later-{index}", count, dict(entry.demand), entry.placement, later=True)
        )
    owner = gang.owner
    source = (
        Source(owner.api_version, owner.kind, gang.namespace, owner.name, owner.uid)
        if owner is not None
        else Source("v1", "Pod", gang.namespace, members[0].name if members else gang.label)
    )
    size = len(members) + sum(count for _, count in later)
    return Gang(
        namespace=gang.namespace,
        name=gang.name,
        min_member=min(min_member, size) if min_member is not None else size,
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


def _hold_later(gang: GangObservation, fleet: Fleet) -> None:
    """Count the room of the gang's later members still to come as used."""
    for entry, count in gang.missing_later_members():
        for index in range(count):
            fleet.place(_placeholder(gang, entry, index))


def _placeholder(gang: GangObservation, entry: LaterMembers, index: int) -> PodInfo:
    return PodInfo(
        namespace=gang.namespace,
        name=f"{gang.label}-later-{index}",
        uid=f"later:{gang.namespace}/{gang.label}/{id(entry)}/{index}",
        resource_version="",
        created=0.0,
        node_name="",
        gates=(),
        demand=entry.demand,
        placement=entry.placement,
    )


def _fitting(
    gang: GangObservation, members: Sequence[PodInfo], fleet: Fleet, least: int
) -> list[PodInfo] | None:
    """Members beyond minMember released as they fit: those that fit now, smallest
    first, placed on the fleet; None (and nothing placed) when fewer than `least` do."""
    chosen: list[tuple[PodInfo, str | None]] = []
    for member in sorted(members, key=lambda m: (sum(m.demand.values()), m.created, m.name)):
        if member.node_name or not member.demand:
            chosen.append((member, None))
            continue
        node = fleet.place(member)
        if node is not None:
            chosen.append((member, node))
    if len(chosen) < least:
        for member, node in chosen:
            if node is not None:
                fleet.unplace(member.uid, node, member.demand)
        return None
    return [member for member, _ in chosen]


Outcome = tuple[State, WaitCode, str]


@dataclass
class _Pass:
    """What one planning pass accumulates: simulated placements, holds, releases."""

    fleet: Fleet
    config: Config
    holders: dict[str, GangObservation] = field(default_factory=dict)
    releases: list[Release] = field(default_factory=list)
    _ever: Capacity | None = None

    def ever(self) -> Capacity:
        """The empty cluster of the nodes the fleet knows (built once per pass)."""
        if self._ever is None:
            self._ever = Capacity(self.config)
            for facts in self.fleet.nodes.values():
                self._ever.upsert_facts(facts)
        return self._ever

    def release(self, gang: GangObservation, pods: Sequence[PodInfo], placed: bool) -> None:
        """Release `pods` (placing them on the fleet unless `placed` already)."""
        if placed:
            self.releases.append(Release(gang=gang, pods=tuple(pods), needs_group=False))
        else:
            self.releases.append(_release(gang, pods, self.fleet))


def _finish(gang: GangObservation, run: _Pass) -> Outcome:
    """Rule 2: a gang partly released. Members beyond minMember go as they fit; any
    other member (one interrupted, or a later member arriving) goes at once."""
    gated = gang.gated
    ungated = gang.present - len(gated)
    if gang.backend == "gate" and gang.min_member is not None and ungated >= gang.min_member:
        fitting = _fitting(gang, gated, run.fleet, 1) or []
        if fitting:
            run.release(gang, fitting, placed=True)
        reason = (
            f"{ungated} members run (minMember {gang.min_member}); "
            f"{len(fitting)} more fit now, {len(gated) - len(fitting)} wait for room"
        )
        return ("releasing" if fitting else "released"), "", reason
    run.release(gang, gated, placed=False)
    reason = f"finishing release: {ungated} of {gang.present} members already ungated"
    return "releasing", "", reason


def _gate(gang: GangObservation, run: _Pass) -> Outcome:
    """Rule 6: the stock scheduler's gang, released only onto room it has now."""
    gated, fleet = gang.gated, run.fleet
    to_come = gang.missing_later_members()
    coming = sum(n for _, n in to_come)
    model = gang_model(gang, gated, later=to_come)
    # fits_now answers True for a capacity with no GPU node at all (admission must
    # not reject blind); holding gates is different: with no node to place them,
    # released members could only sit Pending, or bind piecemeal when nodes appear.
    has_nodes = fleet.capacity.node_count > 0
    if not model.total_demand() or (has_nodes and fits_now(model, fleet.capacity)):
        run.release(gang, gated, placed=False)
        _hold_later(gang, fleet)
        if coming:
            return "releasing", "", (
                f"the {len(gated)} members that can exist fit the free GPUs now, with room "
                f"held for {coming} that arrive after release"
            )
        return "releasing", "", "all members exist and fit the free GPUs now"
    least = (gang.min_member or len(gated)) - coming
    if has_nodes and least < len(gated):
        # More members than minMember: release those that fit, once minMember can.
        smallest = gang_model(gang, gated, later=to_come, min_member=gang.min_member)
        partial = None
        if fits_now(smallest, fleet.capacity):
            partial = _fitting(gang, gated, fleet, least)
        if partial is not None:
            run.release(gang, partial, placed=True)
            _hold_later(gang, fleet)
            return "releasing", "", (
                f"{len(partial)} of {len(gated)} members fit now (minMember "
                f"{gang.min_member}); the rest go as they fit"
            )
    code: WaitCode = "no-fit"
    reason = shortfall(gang, gated, fleet)
    wanted = {m.placement for m in gated}
    held_by = sorted(
        {
            f"{run.holders[n].namespace}/{run.holders[n].name}"
            for p in wanted
            for n in fleet.eligible(p, held=True)
        }
    )
    if held_by:
        code = "held"
        reason += f"; nodes it may use are held for {', '.join(held_by)}, which came first"
    if check_gang(model, run.ever()).allowed:
        for name in fleet.reserve(sorted(wanted, key=repr)):
            run.holders[name] = gang
    else:
        reason += "; it cannot fit even on the empty cluster, so it holds no nodes"
    return "waiting", code, reason


def _decide(gang: GangObservation, run: _Pass) -> Outcome:
    gated = gang.gated
    needed = gang.needed_before_release
    if not gated:
        if gang.missing_later and gang.backend == "gate":
            return "released", "", (
                f"all gates lifted; room held for {gang.missing_later} members that "
                "arrive after release"
            )
        return "released", "", "all gates lifted"
    if len(gated) < gang.present:
        return _finish(gang, run)
    if gang.problem:
        return "waiting", "invalid", gang.problem
    if needed is not None and gang.present < needed:
        reason = f"{gang.present} of {needed} members exist"
        if gang.later:
            reason += f" ({gang.later_count} more arrive after release)"
        return "waiting", "incomplete", reason
    if gang.backend != "gate":
        run.release(gang, gated, placed=False)
        return "releasing", "", f"{gang.present} members exist; {gang.backend} places them"
    return _gate(gang, run)


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
    gangs = observe_gangs(live, config)
    for gang in gangs:
        if gang.backend == "gate" and len(gang.gated) < gang.present:
            # Released (at least in part): its later members' room is taken already.
            _hold_later(gang, fleet)
    run = _Pass(fleet, config)
    reports: list[GangReport] = []
    for gang in gangs:
        state, code, reason = _decide(gang, run)
        age = max(0.0, now - gang.arrived) if gang.arrived else 0.0
        reports.append(
            GangReport(
                namespace=gang.namespace,
                name=gang.name,
                label=gang.label,
                backend=gang.backend,
                min_member=gang.min_member,
                present=gang.present,
                gated=len(gang.gated),
                bound=gang.bound,
                state=state,
                code=code,
                reason=reason,
                age_seconds=age,
                arrived=gang.arrived,
                stuck=state == "waiting" and age >= config.gang_timeout_seconds,
            )
        )
    return Plan(releases=tuple(run.releases), reports=tuple(reports))
