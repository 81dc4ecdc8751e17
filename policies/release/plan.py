"""The controller's decision: which gangs to release now, and why the others wait.

`plan(pods, nodes, config, now)` is one pure pass over everything the API server
holds. It returns the releases to perform (gated members to ungate, and whether a
PodGroup must exist first) and one `GangReport` per gang, which is also what
`gangkeeper status` prints. The rules, in order, for each gang (highest priority,
then oldest, first):

1. No member carries gangkeeper's gate: released once every live member is bound,
   `releasing` ("binding: 3 of 4 bound") until then; members stuck unbound, or the
   gang never Ready, are brought back by the watchdog (`recovery.recover`:
   `Plan.requeues`).
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
   (`policies.fit.feasibility.fits_now`). The later members' room stays counted as used
   until they arrive, and a later member of a released gang is released at once
   (rule 2) onto it. Members beyond minMember (an elastic job's, `minAvailable`
   below the replicas) are released as they fit, once minMember of them can be.
   "Free" already subtracts pods bound to nodes and pods free to schedule but not
   bound yet (in flight, including the gangs this pass releases, placed first-fit on
   nodes they may use), and excludes nodes **held** for an earlier gang. Holding
   rule: a complete gang that does not fit now, but could fit on the empty cluster,
   holds every node its members may use; a later gang may start only if it fits
   entirely on nodes no earlier waiting gang may use, so it never takes GPUs an
   earlier waiting gang could use and backfilling cannot delay that gang. A gang
   that can never fit (it should have been rejected at admission) holds nothing.
   With `placement: pinned` (the default) the gang is released as a placement
   (`pinning.place_gang`): every member is assigned a node with room for all it
   requests (cpu, memory, pods, not GPUs alone) and pinned to it in the patch that
   lifts its gate; a gang with a constraint the assigner does not model is released
   unpinned (`Release.unpinned` says why), one with no assignment waits.
   A gang none of whose members asks for GPUs is no exception: it is assigned, pinned,
   held and refused by what it requests, over every node (with GPUs or not) it may
   use (`pinning.without_gpus`); it holds every such node while it waits.

Gangs are taken by priority (their members' `spec.priority`), then oldest first, so
the holding rule keeps a lower-priority gang from delaying a higher one. Each gang
that waits for room is given its place in that order among the gangs waiting for
nodes it may use (`queue`: `GangReport.queue_position`, `ahead`).

7. Autoscaled pools: a waiting `gate` gang may ask for nodes with placeholder pods,
   which are its reserved room (`policies.autoscaling.asking`, `release.waiting`), or
   a ProvisioningRequest; once provisioned the gang goes at once, annotated to consume
   it: pinned if the pass sees room, else unpinned onto the booked capacity.

Pods that are not gang members are never held by gangkeeper: they use free GPUs like
on any cluster, and the controller counts them as used.

Pure: `PodInfo`s and Node dicts in, frozen dataclasses out. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..assigner.assign import NoRoom, Unpinned
from ..assigner.pin import pin_of
from ..autoscaling.asking import Asking, Backoff
from ..autoscaling.provisioning import RequestInfo, unseen_nodes
from ..cluster.fleet import Fleet, NodeReader
from ..cluster.kept_capacity import KeptCapacity
from ..cluster.later_members import LaterMembers
from ..cluster.observed_gangs import GangObservation, PodInfo, flight_order, observe_gangs
from ..fit.feasibility import check_gang, fits_now
from ..model import Gang
from ..settings.config import Config
from .budgets import Budget
from .gang_model import gang_model
from .holding import hold_and_ask, hold_later, shortfall
from .pass_state import Outcome, Pass, members_that_fit
from .pinning import Pinned, place_gang, try_place, without_gpus
from .preemption import NoPreemption, Preempting, Preemption
from .recovery import rebind, recover
from .results import GangReport, Plan, Release, State, WaitCode
from .watchdog import next_deadline, replacement_stuck


def _finish(gang: GangObservation, run: Pass) -> Outcome:
    """Rule 2: a gang partly released. Members beyond minMember go as they fit; any
    other member (one interrupted, or a later member arriving) goes at once."""
    gated = gang.gated
    ungated = gang.present - len(gated)
    if gang.backend == "gate" and gang.min_member is not None and ungated >= gang.min_member:
        plain = without_gpus(gang.members, ())
        fitting = members_that_fit(gated, run.fleet, 1, run.pinning(gang), plain) or []
        if fitting:
            run.release_fitting(gang, fitting)
        reason = (
            f"{ungated} members run (minMember {gang.min_member}); "
            f"{len(fitting)} more fit now, {len(gated) - len(fitting)} wait for room"
        )
        return ("releasing" if fitting else "released"), "", reason
    short = _replacements_without_room(gang, run) if run.pinning(gang) else []
    if short:
        return _short(gang, short, run)
    run.release(gang, gated, placed=False)
    reason = f"finishing release: {ungated} of {gang.present} members already ungated"
    return "releasing", "", reason


def _replacements_without_room(gang: GangObservation, run: Pass) -> list[PodInfo]:
    """The gated members created after the gang's release (replacements) when a pinned
    release could place some of them nowhere now; [] otherwise, and always when a gated
    member is one of an interrupted release (rule 2 finishes that whatever the room).
    Nothing stays placed."""
    released = min((m.released_at for m in gang.members if m.released_at), default=0.0)
    gated = gang.gated
    if not released or any(m.created <= released for m in gated):
        return []
    placed: list[tuple[PodInfo, str]] = []
    missing: list[PodInfo] = []
    for member in gated:
        if member.node_name:
            continue
        node = run.fleet.place(member, pinnable=True)
        if node is None:
            missing.append(member)
        else:
            placed.append((member, node))
    for member, node in placed:
        run.fleet.unplace(member.uid, node, member.demand, member.requests)
    return missing


def _short(gang: GangObservation, missing: Sequence[PodInfo], run: Pass) -> Outcome:
    """A released gang whose replacement members (one preempted, evicted or deleted,
    recreated by its owner) have no room: they stay gated, since released they could
    only sit Pending; after `rebindSeconds` the whole gang is requeued, not left
    running short."""
    waited = max(0.0, run.now - min(m.created for m in missing))
    run.clocked()  # its reason counts the seconds it has waited
    bound = sum(1 for m in gang.members if m.node_name)
    if waited < run.config.rebind_seconds:
        return "releasing", "", (
            f"{len(missing)} replacement members have no room beside the {bound} bound "
            f"({int(waited)}s; requeued whole after rebindSeconds "
            f"{run.config.rebind_seconds}s)"
        )
    found = replacement_stuck(gang, missing, waited)
    run.requeues.append(rebind(found, run.config, room=False))
    return "releasing", "", (
        f"{len(missing)} replacement members found no room beside the {bound} bound for "
        f"{int(waited)}s: the gang is requeued whole (at most rebindRetries times)"
    )


def _placed(
    gang: GangObservation, to_come: Sequence[tuple[LaterMembers, int]], run: Pass
) -> Pinned | Unpinned | NoRoom:
    """`place_gang`, without its pins when the scheduler places the gang: a gang without
    GPUs has no GPU count to fit, so the assignment is its only test of room."""
    placed = place_gang(gang, gang.gated, to_come, run.fleet, run.config.topology)
    if isinstance(placed, Pinned) and not run.pinning(gang):
        return Pinned({}, {})
    return placed


def _gate(gang: GangObservation, run: Pass) -> Outcome:
    """Rule 6: the stock scheduler's gang, released only onto room it has now."""
    gated, fleet = gang.gated, run.fleet
    to_come = gang.missing_later_members()
    coming = sum(n for _, n in to_come)
    model = gang_model(gang, gated, later=to_come)
    # fits_now answers True for a capacity with no GPU node at all (admission must
    # not reject blind); holding gates is different: with no node to place them,
    # released members could only sit Pending, or bind piecemeal when nodes appear.
    # A gang without GPUs may use any node, so any node will do.
    plain = without_gpus(gated, to_come)
    has_nodes = bool(fleet.nodes) if plain else fleet.capacity.node_count > 0
    lent = run.asking.lend(gang, fleet)  # its placeholders' room is its own
    no_room = ""
    fits = has_nodes and (plain or fits_now(model, fleet.capacity))
    if fits and (run.pinning(gang) or plain):
        placed = _placed(gang, to_come, run)
        if isinstance(placed, Pinned):
            run.release(gang, gated, placed=True, pins=placed.pins)
            held = f", with room held for {coming} that arrive after release" if coming else ""
            where = f"pinned to {len(set(placed.nodes.values()))} nodes" if placed.pins else (
                "the scheduler places them" if not run.pinning(gang) else "no member to pin"
            )
            return "releasing", "", f"the {len(gated)} members fit now; {where}{held}"
        if isinstance(placed, Unpinned):
            run.release(gang, gated, placed=False, unpinned=placed.reason)
            hold_later(gang, fleet)
            return "releasing", "", f"released unpinned: {placed.reason}"
        no_room, fits = placed.reason, False
    if fits:
        run.release(gang, gated, placed=False)
        hold_later(gang, fleet)
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
        if plain or fits_now(smallest, fleet.capacity):
            partial = members_that_fit(gated, fleet, least, run.pinning(gang), plain)
        if partial is not None:
            run.release_fitting(gang, partial)
            hold_later(gang, fleet)
            return "releasing", "", (
                f"{len(partial)} of {len(gated)} members fit now (minMember "
                f"{gang.min_member}); the rest go as they fit"
            )
    run.asking.restore(lent, fleet)
    provisioned = run.asking.provisioned(gang)
    if provisioned is not None:
        why = unseen_nodes(provisioned)
        run.release(gang, gated, placed=False, unpinned=why)
        hold_later(gang, fleet)
        return "releasing", "", f"released unpinned: {why}"
    return _wait(gang, gated, to_come, model, no_room=no_room, run=run)


def _wait(
    gang: GangObservation,
    gated: Sequence[PodInfo],
    to_come: Sequence[tuple[LaterMembers, int]],
    model: Gang,
    *,
    no_room: str,
    run: Pass,
) -> Outcome:
    """A gate-backend gang that does not fit now: why, what it holds and preempts."""
    fleet = run.fleet
    plain = without_gpus(gated, to_come)
    code: WaitCode = "no-fit"
    reason = shortfall(gang, gated, fleet)
    if no_room:
        # A gang without GPUs: the assigner's numbers are the shortfall's own.
        reason = no_room if plain else f"{reason}; {no_room}"
    wanted = {m.placement for m in gated}
    preempting = _preempt(gang, gated, to_come, model, run)
    if isinstance(preempting, Preemption):
        code = "preempting"
        reason += f"; preempting {preempting.summary()}"
    elif preempting.waiting_for_leaving:
        code = "preempting"
        reason += f"; it fits once {preempting.waiting_for_leaving} pods leaving are gone"
    elif preempting.reason:
        reason += f"; it preempts nothing: {preempting.reason}"
    mix = frozenset(wanted)
    run.waiting.append((gang, mix, plain))
    held_by = run.held_by(mix, plain)
    if held_by:
        code = "held"
        reason += f"; nodes it may use are held for {', '.join(held_by)}, which came first"
    outcome = hold_and_ask(
        gang, fleet=fleet, asking=run.asking, ever=run.ever(), model=model, wanted=wanted,
        plain=plain,
    )
    run.hold(outcome.held, gang)
    if code == "preempting":
        return "waiting", code, reason + outcome.reason
    return "waiting", outcome.code or code, reason + outcome.reason


def _preempt(
    gang: GangObservation,
    gated: Sequence[PodInfo],
    to_come: Sequence[tuple[LaterMembers, int]],
    model: Gang,
    run: Pass,
) -> Preemption | NoPreemption:
    """Rule 8: a waiting gang of higher priority may take lower-priority work's room."""
    fleet = run.fleet

    plain = without_gpus(gated, to_come)

    def fits() -> bool:
        # The release's own test, on the fleet as preemption has changed it.
        if not plain and not fits_now(model, fleet.capacity):
            return False
        if not run.pinning(gang) and not plain:
            return True
        placed = try_place(gang, gated, to_come, fleet, run.config.topology)
        return not isinstance(placed, NoRoom)

    placements = {m.placement for m in gated} | {e.placement for e, _ in to_come}
    return run.preempting.choose(
        gang, placements, fits, need=model.total_demand(), plain=plain,
        could_ever_fit=lambda: check_gang(model, run.ever()).allowed,
    )


def decide_gang(gang: GangObservation, run: Pass) -> Outcome:
    """Rules 1-6 for one gang, on the pass as the gangs before it left it."""
    gated = gang.gated
    needed = gang.needed_before_release
    if not gated:
        recovering, requeues = recover(gang, run.fleet, run.config, run.now)
        run.requeues.extend(requeues)
        run.until(next_deadline(gang, run.config))
        # Released means bound: a gang some of whose members are not bound yet is
        # still being released (its gates are lifted; the scheduler binds them).
        state: State = "released" if gang.bound == gang.present else "releasing"
        if recovering:
            return state, "", recovering
        lifted = (
            "all gates lifted" if state == "released"
            else f"binding: {gang.bound} of {gang.present} bound"
        )
        if gang.missing_later and gang.backend == "gate":
            return state, "", (
                f"{lifted}; room held for {gang.missing_later} members that "
                "arrive after release"
            )
        return state, "", lifted
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


def _assignment(gang: GangObservation, run: Pass) -> tuple[tuple[str, str], ...]:
    """Member → node: where it is bound, else where it is pinned (by the user, an
    earlier pass or this one; an earlier version's pin names a hostname label, shown
    as the node)."""
    pinned = run.pins.get(gang.key, {})
    memo = run.assignments
    if memo is not None:
        hit = memo.get(gang.key)
        if hit is not None and hit[0] is gang and hit[1] == pinned:
            return hit[2]  # type: ignore[no-any-return]
    out: list[tuple[str, str]] = []
    for member in gang.members:
        if member.node_name:
            out.append((member.name, member.node_name))
            continue
        node = pinned.get(member.uid, "")
        pin = None if node else pin_of(member.placement)
        if pin is not None:
            node = pin.node or run.node_of_host(pin.hostname)
        if node:
            out.append((member.name, node))
    if memo is not None:
        memo[gang.key] = (gang, dict(pinned), tuple(out))
    return tuple(out)


#: A planner's start of a pass: (live pods, now, on_release) → the gangs in order, the
#: pass after deciding them, and each gang's outcome.
Start = Callable[
    [list[PodInfo], float, Callable[[Release], None] | None],
    tuple[list[GangObservation], Pass, list[Outcome]],
]


def _from_scratch(
    live: list[PodInfo],
    nodes: Iterable[Mapping[str, Any]],
    config: Config,
    now: float,
    *,
    backoff: Backoff | None,
    requests: Iterable[RequestInfo] | None,
    reader: NodeReader | None,
    leaving: frozenset[str],
    budgets: Sequence[Budget],
    on_release: Callable[[Release], None] | None,
    kept: KeptCapacity | None,
) -> tuple[list[GangObservation], Pass, list[Outcome]]:
    """The fleet with bound and in-flight pods, the gangs, and each gang decided."""
    fleet = Fleet(nodes, live, config, reader, None if kept is None else kept.fleet_copy())
    asking = Asking.of(live, config, now, backoff or {}, requests)
    in_flight = sorted((p for p in live if p.in_flight), key=flight_order)
    for pod, node in fleet.place_in_flight(in_flight):
        asking.placed(pod, node)
    gangs = observe_gangs(live, config)
    for gang in gangs:
        if gang.backend == "gate" and len(gang.gated) < gang.present:
            # Released (at least in part): its later members' room is taken already.
            hold_later(gang, fleet)
    preempting = Preempting(fleet, config, gangs, live, leaving=leaving, budgets=budgets)
    run = Pass(fleet, config, asking, preempting, now=now, on_release=on_release,
               _ever=None if kept is None else kept.every)
    return gangs, run, [decide_gang(gang, run) for gang in gangs]


def plan(
    pods: Iterable[PodInfo],
    nodes: Iterable[Mapping[str, Any]],
    config: Config,
    now: float,
    backoff: Backoff | None = None, *, requests: Iterable[RequestInfo] | None = None,
    reader: NodeReader | None = None,
    leaving: frozenset[str] = frozenset(),
    budgets: Sequence[Budget] = (),
    on_release: Callable[[Release], None] | None = None,
    kept: KeptCapacity | None = None,
    start: Start | None = None,
) -> Plan:
    """Decide one pass; `pods` are the live pods of the whole cluster; `backoff`: gangs'
    timed-out asks (kept by the controller); `requests`: gangkeeper's ProvisioningRequests
    (None: the cluster does not serve them); `reader`: how Node dicts are read (a
    `planner.Planner` keeps them read between passes); `leaving`: uids of pods preempted
    by an earlier pass and not gone yet (kept by the controller); `budgets`: the
    cluster's PodDisruptionBudgets; `on_release`: called with each release as soon as
    it is decided, before the pass goes on to the next gang (a release is never taken
    back later in the pass), so its patches need not wait for the other gangs; `kept`:
    the capacities of exactly these `nodes` (as `reader` reads them), kept by a
    planner between passes, instead of building them here; `start`: a planner's
    own way to the gangs, the pass and every gang's outcome from `live`, `now` and
    `on_release` (`planner.Planner`: what a pass from scratch decides, from what it
    kept), instead of the steps here."""
    live = list(pods)
    if start is not None:
        gangs, run, outcomes = start(live, now, on_release)
    else:
        gangs, run, outcomes = _from_scratch(
            live, nodes, config, now, backoff=backoff, requests=requests, reader=reader,
            leaving=leaving, budgets=budgets, on_release=on_release, kept=kept,
        )
    asking, preempting = run.asking, run.preempting
    queue = run.queue()
    reports: list[GangReport] = []
    for gang, (state, code, reason) in zip(gangs, outcomes, strict=True):
        age = max(0.0, now - gang.arrived) if gang.arrived else 0.0
        if state == "waiting" and gang.arrived:
            run.until(gang.arrived + config.gang_timeout_seconds)  # turns stuck then
        place = queue.get(gang.key)
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
                assignment=_assignment(gang, run),
                priority=gang.priority,
                queue_position=place.position if place else None,
                queue_length=place.length if place else 0,
                ahead=place.ahead if place else (),
            )
        )
    return Plan(
        releases=tuple(run.releases),
        reports=tuple(reports),
        gangs=tuple(gangs),
        requeues=tuple(run.requeues),
        preemptions=tuple(preempting.preemptions),
        asks=tuple(asking.asks),
        orphans=asking.orphans(),
        request_asks=tuple(asking.request_asks),
        request_orphans=asking.request_orphans(gangs),
        valid_until=now if asking.clocked else run.valid_until,
    )
