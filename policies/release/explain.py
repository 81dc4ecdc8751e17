"""`gangkeeper explain`: why one gang waits, in the style of `kubectl describe`.

`explain(pods, nodes, config, now, target)` finds the gang of a pod or of a workload
(by the `gangkeeper.io/owner` annotation its pods carry), runs the controller's own
plan (so the verdict is the controller's), and gathers what a person asks next: the
members present and needed, the GPUs the gang asks for and the free GPUs on the nodes
its members may use (what it was compared with), the older waiting gangs that hold
some of those nodes (the holding rule of `plan`: a waiting gang that could fit on the
empty cluster holds every node its members may use), its place in the queue for
those nodes and the gangs ahead of it (`queue`), and its pods. `render` formats
that and the Events the command lists.

Pure: plain Pod/Node/Event dicts in, text out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..autoscaling.provisioning import request_info
from ..cluster.capacity import Capacity
from ..cluster.fleet import Fleet
from ..cluster.observed_gangs import GangObservation, PodInfo, is_live, observe_gangs, pod_info
from ..dra.resource_names import counts_other_names, resource_text
from ..errors import NotAGang as NotAGang
from ..fit.feasibility import check_gang
from ..settings.config import Config
from .budgets import read_budgets
from .gang_model import gang_model
from .plan import plan
from .queue import ordinal
from .results import GangReport

#: The wait codes of gangs that hold the nodes they may use (the holding rule).
HOLDING_CODES = ("no-fit", "held", "preempting")


@dataclass(frozen=True)
class Target:
    """`pod/NAME` (or a bare NAME) or `KIND/NAME` of a workload, in a namespace."""

    namespace: str
    kind: str
    name: str

    @classmethod
    def parse(cls, text: str, namespace: str) -> Target:
        kind, _, name = text.rpartition("/")
        if not name:
            raise NotAGang(f"{text!r}: give POD, pod/NAME or KIND/NAME")
        return cls(namespace, (kind or "pod").lower(), name)


@dataclass(frozen=True)
class Explanation:
    report: GangReport
    owner: str
    #: Total GPUs asked per resource by the members still gated.
    demand: Mapping[str, int]
    #: Free GPUs per node the members may use: ((node, {resource: free}), ...).
    free: tuple[tuple[str, Mapping[str, int]], ...]
    #: Older waiting gangs and the nodes of this gang's they hold.
    held_by: tuple[tuple[str, tuple[str, ...]], ...]
    #: (pod name, gated, node) for every live member.
    members: tuple[tuple[str, bool, str], ...]
    #: The priority of each gang named ahead of it in the queue ("ns/name" → priority).
    ahead_priority: Mapping[str, int] = field(default_factory=dict)


def _find(gangs: Sequence[GangObservation], target: Target) -> GangObservation:
    mine = [g for g in gangs if g.namespace == target.namespace]
    if target.kind in ("pod", "pods", "po"):
        for gang in mine:
            if any(m.name == target.name for m in gang.members):
                return gang
        raise NotAGang(
            f"pod {target.namespace}/{target.name} is not a live member of a gang "
            "(no gangkeeper.io/gang label, or finished, or not found)"
        )
    for gang in mine:
        owner = gang.owner
        if owner and owner.kind.lower() in _kinds(target.kind) and owner.name == target.name:
            return gang
    raise NotAGang(
        f"no live gang pods owned by {target.kind}/{target.name} in {target.namespace}"
    )


def _kinds(kind: str) -> set[str]:
    """`jobset`, `jobsets`, `JobSet` all name the kind JobSet."""
    return {kind, kind.removesuffix("s"), kind.removesuffix("es")}


def explain(
    pods: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    config: Config,
    now: float,
    target: Target,
    *,
    requests: Iterable[Mapping[str, Any]] | None = None,
    budgets: Iterable[Mapping[str, Any]] = (),
) -> Explanation:
    """`requests`: the cluster's ProvisioningRequest dicts (None: not served/asked);
    `budgets`: its PodDisruptionBudget dicts (what preemption may not evict)."""
    node_list = list(nodes)
    live: list[PodInfo] = [pod_info(p, config) for p in pods if is_live(p)]
    gangs = observe_gangs(live, config)
    gang = _find(gangs, target)
    asked = None if requests is None else [i for r in requests if (i := request_info(r))]
    reports = {(r.namespace, r.label): r
               for r in plan(live, node_list, config, now, requests=asked,
                             budgets=read_budgets(budgets)).reports}
    report = reports[(gang.namespace, gang.label)]
    priorities = {f"{r.namespace}/{r.name}": r.priority for r in reports.values()}
    ahead_priority = {name: priorities[name] for name in report.ahead if name in priorities}
    fleet = Fleet(node_list, live, config)
    gated = gang.gated
    demand: dict[str, int] = {}
    for member in gated:
        for resource, amount in member.demand.items():
            demand[resource] = demand.get(resource, 0) + amount
    usable = sorted({n for m in (gated or gang.members) for n in fleet.eligible(m.placement)})
    free = tuple((n, fleet.free(n)) for n in usable)
    empty = Capacity(config)  # the empty cluster, for the holding rule
    for facts in fleet.nodes.values():
        empty.upsert_facts(facts)
    held_by = []
    for older in gangs:
        if older is gang:
            break  # observe_gangs is oldest first: only those before it come first
        other = reports.get((older.namespace, older.label))
        if other is None or other.state != "waiting" or other.code not in HOLDING_CODES:
            continue
        later = older.missing_later_members()
        if not check_gang(gang_model(older, older.gated, later=later), empty).allowed:
            continue  # a gang that cannot fit even on the empty cluster holds nothing
        theirs = {n for m in older.gated for n in fleet.eligible(m.placement)}
        shared = tuple(n for n in usable if n in theirs)
        if shared:
            held_by.append((f"{older.namespace}/{older.name}", shared))
    owner = f"{gang.owner.kind}/{gang.owner.name}" if gang.owner else "<none>"
    members = tuple((m.name, m.gated, m.node_name) for m in gang.members)
    return Explanation(report, owner, demand, free, tuple(held_by), members, ahead_priority)


def queue_text(expl: Explanation) -> str:
    """"3rd of 5 waiting for the nodes it may use; ahead: a/x (priority 100), b/y and
    1 more" (a gang ahead is given its priority when it is not this gang's own), or
    why the gang is in no queue."""
    r = expl.report
    if r.queue_position is None:
        return "none: it does not wait for room" if r.state == "waiting" else "none"
    text = f"{ordinal(r.queue_position)} of {r.queue_length} waiting for the nodes it may use"
    if not r.ahead:
        return text
    names = []
    for name in r.ahead:
        priority = expl.ahead_priority.get(name, r.priority)
        names.append(name if priority == r.priority else f"{name} (priority {priority})")
    more = r.queue_position - 1 - len(r.ahead)
    return f"{text}; ahead: {', '.join(names)}" + (f" and {more} more" if more else "")


def _age(seconds: float) -> str:
    """A duration as kubectl prints ages (apimachinery's `duration.HumanDuration`):
    two units while the second still says something (5m12s, 5h30m, 2d3h), one after."""
    s = max(int(seconds), 0)
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if minutes < 10:
        return f"{minutes}m" + (f"{s % 60}s" if s % 60 else "")
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h" + (f"{minutes % 60}m" if minutes % 60 else "")
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{days}d" + (f"{hours % 24}h" if hours % 24 else "")
    if days < 730:
        return f"{days}d"
    years = days // 365
    if years < 8:
        return f"{years}y" + (f"{days % 365}d" if days % 365 else "")
    return f"{years}y"


#: Where every label's value starts, as in `kubectl describe`.
_LABEL_WIDTH = 14


def _field(label: str, value: str) -> str:
    return f"{label + ':':<{_LABEL_WIDTH}}{value}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    return [
        (indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))).rstrip()
        for row in (header, *rows)
    ]


def _event_time(event: Mapping[str, Any]) -> str:
    for key in ("eventTime", "lastTimestamp", "deprecatedLastTimestamp", "firstTimestamp"):
        value = event.get(key)
        if value:
            return str(value)
    return str((event.get("metadata") or {}).get("creationTimestamp") or "")


def _held_note(expl: Explanation, resources: Sequence[str]) -> str:
    """How much of the free count older gangs hold: the reason's "0 free" counts only
    what this gang may take, so say why the two numbers differ."""
    held_nodes = {n for _, nodes in expl.held_by for n in nodes}
    held = [
        (res, sum(free.get(res, 0) for n, free in expl.free if n in held_nodes))
        for res in resources
    ]
    held = [(res, n) for res, n in held if n]
    if not held:
        return ""
    owners = ", ".join(gang for gang, _ in expl.held_by)
    amounts = ", ".join(f"{n} {resource_text(res)}" for res, n in held)
    return f"; {amounts} of them held for {owners}, which came first"


def render(expl: Explanation, events: Sequence[Mapping[str, Any]]) -> str:
    """kubectl-describe style text; `events` are events.k8s.io/v1 Event dicts."""
    r = expl.report
    needed = "?" if r.min_member is None else str(r.min_member)
    state = "stuck" if r.stuck else r.state
    lines = [
        _field("Name", f"{r.namespace}/{r.name}"),
        _field("Gang label", r.label),
        _field("Owner", expl.owner),
        _field("Backend", r.backend),
        _field("State", state + (f" ({r.code})" if r.code else "")),
        _field("Members", f"{r.present} present / {needed} needed "
                          f"({r.gated} gated, {r.bound} bound)"),
        _field("Age", _age(r.age_seconds)),
        _field("Why", r.reason),
        _field("Queue", queue_text(expl)),
    ]
    asked = ", ".join(
        f"{resource_text(res)}: {n}" for res, n in sorted(expl.demand.items())) or "none gated"
    lines.append(_field("Asks for", asked))
    # A class's whole nodes (All requests) are shown to a gang that asks them only.
    resources = sorted({res for _, free in expl.free for res in free
                        if not counts_other_names(res)} | set(expl.demand))
    totals = ", ".join(
        f"{resource_text(res)}: {sum(free.get(res, 0) for _, free in expl.free)}"
        for res in resources
    )
    # A continuation of "Asks for" in the value column, so labels keep one column.
    lines.append(
        " " * _LABEL_WIDTH + f"Compared with: {totals or 'no GPUs'} free on the "
        f"{len(expl.free)} nodes its members may use{_held_note(expl, resources)}"
    )
    if expl.free:
        rows = [
            [node, ", ".join(f"{resource_text(res)}={free.get(res, 0)}" for res in resources)]
            for node, free in expl.free
        ]
        lines += _table(["NODE", "FREE"], rows)
    lines.append("Held for older gangs:" + ("" if expl.held_by else " none"))
    for gang, held in expl.held_by:
        lines.append(f"  {gang}: {', '.join(held)}")
    lines.append("Pods:")
    lines += _table(
        ["NAME", "GATED", "NODE"],
        [[name, "yes" if gated else "no", node or "<none>"] for name, gated, node in expl.members],
    )
    lines.append("Events:" + ("" if events else " <none>"))
    if events:
        rows = [
            [
                str(e.get("type", "")),
                str(e.get("reason", "")),
                _event_time(e),
                "{kind}/{name}".format(**{"kind": "", "name": "", **(e.get("regarding") or {})}),
                str(e.get("reportingController") or (e.get("source") or {}).get("component", "")),
                str(e.get("note") or e.get("message") or ""),
            ]
            for e in sorted(events, key=_event_time)
        ]
        lines += _table(["TYPE", "REASON", "TIME", "OBJECT", "FROM", "MESSAGE"], rows)
    return "\n".join(lines) + "\n"
