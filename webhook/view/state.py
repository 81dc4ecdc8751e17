"""What `gangkeeper view` shows, computed from plain Pod, Node and Event dicts.

`build(pods, nodes, config, now)` runs the controller's own plan (as `gangkeeper
status` does) and adds what a browser page needs on top of its reports:

- each waiting gang's place in the queue for the nodes it may use, as the plan gives
  it (`policies.release.queue`: the gangs waiting for room whose eligible nodes
  overlap its own, in the plan's order: priority, then age);
- gangs released but partly bound, or bound but not Ready, flagged;
- the fleet as GPU cells: each held by a gang member, another pod or a placeholder,
  free, or free but held for a waiting gang (the holding rule of `plan`, as
  `explain` reads it: the first waiting gang that could fit on the empty cluster
  holds every node its members may use).

`explain_text` is `gangkeeper explain`'s text for one gang (computed on first ask,
then kept with the snapshot: it re-runs the plan).

Pure: plain dicts in, frozen dataclasses out. No I/O, no HTTP.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gangkeeper.policies.autoscaling.provisioning import request_info
from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.cluster.fleet import Fleet, NodeReader
from gangkeeper.policies.cluster.node_facts import NodeFacts, read_node
from gangkeeper.policies.cluster.observed_gangs import GangObservation, PodInfo, is_live, pod_info
from gangkeeper.policies.dra.extended import UNCOUNTED
from gangkeeper.policies.dra.resource_names import counts_other_names, resource_text
from gangkeeper.policies.fit.feasibility import check_gang
from gangkeeper.policies.release.budgets import read_budgets
from gangkeeper.policies.release.explain import HOLDING_CODES, Target, explain, render
from gangkeeper.policies.release.gang_model import gang_model
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import GangReport
from gangkeeper.policies.settings.config import Config

#: Waiting codes of gangs that wait for room (the others wait for members or a fix).
CAPACITY_CODES = HOLDING_CODES
#: The states a queue filter may name ("stuck": waiting past the gang timeout).
STATES = ("all", "waiting", "releasing", "released", "stuck")

CellKind = Literal["gang", "other", "placeholder", "held", "free"]
GangKey = tuple[str, str]


@dataclass(frozen=True)
class QueueRow:
    """One gang as the queue page lists it."""

    namespace: str
    name: str
    label: str
    #: The plan's state, or "stuck" (waiting past `Config.gang_timeout_seconds`).
    state: str
    code: str
    reason: str
    age_seconds: float
    priority: int
    present: int
    needed: int | None
    gated: int
    bound: int
    ready: int
    #: 1-based place among the gangs waiting for the same capacity; None when the
    #: gang does not wait for room (released, incomplete, invalid).
    position: int | None = None
    #: How many gangs wait for capacity overlapping this gang's (itself included).
    queue_length: int = 0
    #: The first gangs ahead of it ("ns/name"), and how many are ahead in all.
    ahead: tuple[str, ...] = ()
    ahead_count: int = 0
    #: What makes the gang stand out: "partly bound", "not Ready", "stuck".
    flags: tuple[str, ...] = ()
    #: "Kind/name" of its top-level owner, "" when none.
    owner: str = ""

    @property
    def key(self) -> GangKey:
        return (self.namespace, self.label)

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "gang": self.name,
            "label": self.label,
            "state": self.state,
            "code": self.code,
            "reason": self.reason,
            "ageSeconds": round(self.age_seconds, 1),
            "priority": self.priority,
            "present": self.present,
            "needed": self.needed,
            "gated": self.gated,
            "bound": self.bound,
            "ready": self.ready,
            "position": self.position,
            "queueLength": self.queue_length,
            "ahead": list(self.ahead),
            "aheadCount": self.ahead_count,
            "flags": list(self.flags),
            "owner": self.owner,
        }


@dataclass(frozen=True)
class Member:
    name: str
    #: The node it is bound to, or the one it is pinned to; "" when neither.
    node: str
    #: Where it stands: "bound", "pinned, not bound yet", "gated: ...", ...
    status: str
    ready: bool


@dataclass(frozen=True)
class Owner:
    api_version: str
    kind: str
    name: str

    @property
    def resource(self) -> str:
        """`kind.group` as kubectl takes it (the core group has no suffix)."""
        group = self.api_version.rpartition("/")[0]
        return f"{self.kind.lower()}.{group}" if group else self.kind.lower()


@dataclass(frozen=True)
class GangDetail:
    row: QueueRow
    members: tuple[Member, ...]
    owner: Owner | None
    #: The target `gangkeeper explain` takes for this gang (`kind/name` or a pod).
    target: str


@dataclass(frozen=True)
class Cell:
    kind: CellKind
    #: The gang ("ns/name"), pod or waiting gang the cell is about; "" when free.
    who: str = ""
    #: The pod is not bound yet: free to schedule, counted where the plan places it.
    coming: bool = False


@dataclass(frozen=True)
class NodeRow:
    name: str
    #: The value of the first configured topology label it carries ("" when none).
    domain: str
    resource: str
    cells: tuple[Cell, ...]
    cordoned: bool
    taints: tuple[str, ...]
    ready: bool

    @property
    def shape(self) -> str:
        """What nodes alike in the fleet picture share: GPU kind and count."""
        return f"{len(self.cells)} x {self.resource}"


@dataclass(frozen=True)
class ShapeRow:
    """Nodes of one shape (and topology domain), summed (large fleets)."""

    shape: str
    domain: str
    nodes: int
    gpus: int
    #: Cells per kind, summed over the nodes.
    counts: Mapping[str, int]
    cordoned: int
    tainted: int


@dataclass(frozen=True)
class FleetView:
    nodes: tuple[NodeRow, ...]
    shapes: tuple[ShapeRow, ...]
    #: The topology label the rows are grouped by ("" when none is configured).
    topology_key: str
    #: More nodes than `aggregate_above`: the page shows `shapes`, not `nodes`.
    aggregated: bool

    def totals(self) -> dict[str, int]:
        out = {kind: 0 for kind in ("gang", "other", "placeholder", "held", "free")}
        for shape in self.shapes:
            for kind, count in shape.counts.items():
                out[kind] += count
        return out


@dataclass(frozen=True)
class ViewState:
    """One snapshot of the cluster as the pages show it."""

    generated: float
    rows: tuple[QueueRow, ...]
    details: Mapping[GangKey, GangDetail]
    fleet: FleetView
    #: What the snapshot was computed from, for `explain_text`.
    pods: Sequence[Mapping[str, Any]] = ()
    nodes: Sequence[Mapping[str, Any]] = ()
    events: Sequence[Mapping[str, Any]] = ()
    config: Config = field(default_factory=Config)
    requests: Sequence[Mapping[str, Any]] | None = None
    #: The PodDisruptionBudget dicts the plan and `explain_text` read.
    budgets: Sequence[Mapping[str, Any]] = ()
    #: Why Events are missing ("" when they were listed).
    events_note: str = ""
    #: What the user may not read that the snapshot lacks (pods of some namespaces),
    #: said on every page.
    notes: tuple[str, ...] = ()
    _explained: dict[GangKey, str] = field(default_factory=dict, compare=False, repr=False)

    def rows_where(self, namespace: str = "", state: str = "all") -> list[QueueRow]:
        """The queue filtered by namespace ("" = all) and state (one of `STATES`)."""
        return [
            r for r in self.rows
            if (not namespace or r.namespace == namespace)
            and (state in ("all", r.state) or (state == "waiting" and r.state == "stuck"))
        ]

    def events_of(self, key: GangKey) -> list[Mapping[str, Any]]:
        """The Events about a gang's pods or its owner (as `gangkeeper explain` picks)."""
        detail = self.details.get(key)
        if detail is None:
            return []
        names = {m.name for m in detail.members} | ({detail.owner.name} if detail.owner else set())
        return [
            e for e in self.events
            if (e.get("regarding") or {}).get("name") in names
            and (e.get("metadata") or {}).get("namespace", key[0]) == key[0]
        ]


def build(
    pods: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    config: Config,
    now: float,
    *,
    namespace: str | None = None,
    events: Sequence[Mapping[str, Any]] = (),
    requests: Sequence[Mapping[str, Any]] | None = None,
    events_note: str = "",
    aggregate_above: int = 200,
    budgets: Sequence[Mapping[str, Any]] = (),
    notes: Sequence[str] = (),
) -> ViewState:
    """The snapshot of every gang (or those of `namespace`) and of the whole fleet.

    Every pod is needed, not only those of `namespace`: pods elsewhere use the GPUs a
    gang waits for (as in `gang_status`).
    """
    pod_list, node_list = list(pods), list(nodes)
    infos = [pod_info(p, config) for p in pod_list if is_live(p)]
    asked = None if requests is None else [i for r in requests if (i := request_info(r))]
    read = _reading(config)  # each Node read once, for the plan and the fresh fleet
    result = plan(infos, node_list, config, now, requests=asked, reader=read,
                  budgets=read_budgets(budgets))
    fleet = Fleet(node_list, infos, config, read)  # fresh: nothing held, nothing simulated
    pairs = list(zip(result.gangs, result.reports, strict=True))
    eligible = _eligible_sets(pairs, fleet)
    rows: list[QueueRow] = []
    details: dict[GangKey, GangDetail] = {}
    for gang, report in pairs:
        if namespace is not None and gang.namespace != namespace:
            continue
        row = _row(gang, report)
        rows.append(row)
        details[row.key] = _detail(gang, report, row)
    holders = _holders(pairs, eligible, fleet, config)
    view = _fleet(fleet, infos, holders, config, aggregate_above)
    return ViewState(
        generated=now, rows=tuple(rows), details=details, fleet=view, pods=pod_list,
        nodes=node_list, events=events, config=config, requests=requests,
        budgets=budgets, events_note=events_note, notes=tuple(notes),
    )


def _reading(config: Config) -> NodeReader:
    """`read_node` remembered per Node dict (by identity: the dicts live as long as the
    pass); an unreadable node raises each time, as `Fleet` expects."""
    seen: dict[int, NodeFacts] = {}

    def read(raw: Mapping[str, Any]) -> NodeFacts:
        found = seen.get(id(raw))
        if found is None:
            found = seen[id(raw)] = read_node(raw, config)
        return found

    return read


def explain_text(state: ViewState, key: GangKey) -> str:
    """`gangkeeper explain`'s text for the gang, with its Events (kept per snapshot)."""
    found = state._explained.get(key)
    if found is None:
        detail = state.details[key]
        explained = explain(
            state.pods, state.nodes, state.config, state.generated,
            Target.parse(detail.target, key[0]), requests=state.requests,
            budgets=state.budgets,
        )
        found = state._explained[key] = render(explained, state.events_of(key))
    return found


# --- the queue ----------------------------------------------------------------------

_Pair = tuple[GangObservation, GangReport]


def _waits_for_room(report: GangReport) -> bool:
    return report.state == "waiting" and report.code in CAPACITY_CODES


def _eligible_sets(pairs: Sequence[_Pair], fleet: Fleet) -> dict[GangKey, frozenset[str]]:
    """The nodes each gang waiting for room may use, for the fleet picture's holders
    (one set per distinct placement mix: most gangs share a few, so sets are shared)."""
    by_mix: dict[frozenset[Any], frozenset[str]] = {}
    out: dict[GangKey, frozenset[str]] = {}
    for gang, report in pairs:
        if not _waits_for_room(report):
            continue
        mix = frozenset(m.placement for m in gang.gated or gang.members)
        names = by_mix.get(mix)
        if names is None:
            names = by_mix[mix] = frozenset(n for p in mix for n in fleet.eligible(p))
        out[gang.key] = names
    return out


def _row(gang: GangObservation, report: GangReport) -> QueueRow:
    ready = sum(1 for m in gang.members if m.ready)
    flags: list[str] = []
    if report.stuck:
        flags.append("stuck")
    if report.state != "waiting" and report.gated < report.present:
        if report.bound < report.present:
            flags.append(f"partly bound ({report.bound} of {report.present})")
        elif ready < report.present:
            flags.append(f"not Ready ({ready} of {report.present})")
    owner = gang.owner
    return QueueRow(
        namespace=report.namespace, name=report.name, label=report.label,
        state="stuck" if report.stuck else report.state, code=report.code,
        reason=report.reason, age_seconds=report.age_seconds, priority=report.priority,
        present=report.present, needed=report.min_member, gated=report.gated,
        bound=report.bound, ready=ready,
        position=report.queue_position, queue_length=report.queue_length,
        ahead=report.ahead,
        ahead_count=report.queue_position - 1 if report.queue_position else 0,
        flags=tuple(flags), owner=f"{owner.kind}/{owner.name}" if owner else "",
    )


def _detail(gang: GangObservation, report: GangReport, row: QueueRow) -> GangDetail:
    assigned = dict(report.assignment)
    members = []
    for m in gang.members:
        if m.node_name:
            status = "bound, Ready" if m.ready else "bound, not Ready"
        elif m.name in assigned:
            status = "pinned, not bound yet"
        elif m.gated:
            status = f"gated: the gang is {row.state}" + (f" ({row.code})" if row.code else "")
        else:
            status = "ungated, not scheduled yet"
        members.append(Member(m.name, m.node_name or assigned.get(m.name, ""), status, m.ready))
    owner = gang.owner
    target = (
        f"{owner.kind.lower()}/{owner.name}" if owner else f"pod/{gang.members[0].name}"
    )
    return GangDetail(
        row=row, members=tuple(members),
        owner=Owner(owner.api_version, owner.kind, owner.name) if owner else None,
        target=target,
    )


# --- the fleet ----------------------------------------------------------------------


def _holders(
    pairs: Sequence[_Pair], eligible: Mapping[GangKey, frozenset[str]], fleet: Fleet,
    config: Config,
) -> dict[str, str]:
    """Node → the waiting gang ("ns/name") it is held for (the plan's holding rule)."""
    empty = Capacity(config)
    for facts in fleet.nodes.values():
        empty.upsert_facts(facts)
    held: dict[str, str] = {}
    for gang, _ in pairs:
        names = eligible.get(gang.key)
        if not names or names.issubset(held):
            continue
        later = gang.missing_later_members()
        if not check_gang(gang_model(gang, gang.gated, later=later), empty).allowed:
            continue  # a gang that can never fit holds nothing
        who = f"{gang.namespace}/{gang.name}"
        for name in names:
            held.setdefault(name, who)
    return held


def _fleet(
    fleet: Fleet, infos: Sequence[PodInfo], holders: Mapping[str, str], config: Config,
    aggregate_above: int,
) -> FleetView:
    on_node: dict[str, list[PodInfo]] = {}
    for pod in infos:
        if pod.node_name and pod.demand:
            on_node.setdefault(pod.node_name, []).append(pod)
    # Pods free to schedule but not bound take room where the plan places them (first
    # fit, oldest first, as `plan` counts them).
    for pod in sorted((p for p in infos if p.in_flight), key=lambda p: (p.created, p.name)):
        node = fleet.place(pod)
        if node is not None:
            on_node.setdefault(node, []).append(pod)
    topology_key = config.topology[0] if config.topology else ""
    rows: list[NodeRow] = []
    for name in sorted(fleet.nodes):
        facts = fleet.nodes[name]
        pods = sorted(on_node.get(name, []), key=lambda p: (p.created, p.name))
        for resource, total in sorted(facts.gpus.items()):
            if counts_other_names(resource):
                continue  # a class's whole node: its devices are drawn already
            # Devices allocated claims hold (no pod's limits count them) are used, as
            # the packing and the reasons count them.
            cells = [CLAIMED] * facts.held.get(resource, 0)
            for pod in pods:
                cells += [_cell(pod)] * pod.demand.get(resource, 0)
            worded = resource_text(resource)  # a class's devices are `dra:<class>` inside
            if total >= UNCOUNTED:
                # Split, shared or tainted devices, or a selector CEL cannot decide: how
                # many there are is unknown, so only what is used is drawn.
                worded += " (how many: unknown)"
            else:
                cells = cells[:total]  # an over-committed node shows what it has
                free = Cell("held", holders[name]) if name in holders else Cell("free")
                cells += [free] * (total - len(cells))
            rows.append(NodeRow(
                name=name, domain=facts.labels.get(topology_key, "") if topology_key else "",
                resource=worded, cells=tuple(cells),
                cordoned=facts.unschedulable,
                taints=tuple(f"{t.key}={t.value}:{t.effect}" if t.value else
                             f"{t.key}:{t.effect}" for t in facts.taints),
                ready=facts.ready,
            ))
    rows.sort(key=lambda r: (r.domain, r.name, r.resource))
    return FleetView(
        nodes=tuple(rows), shapes=_shapes(rows), topology_key=topology_key,
        aggregated=len(fleet.nodes) > aggregate_above,
    )


#: A device an allocated ResourceClaim holds that no pod's limits count.
CLAIMED = Cell("other", "allocated ResourceClaims")


def _cell(pod: PodInfo) -> Cell:
    coming = not pod.node_name
    if pod.gang:
        return Cell("gang", f"{pod.namespace}/{pod.gang_name or pod.gang}", coming)
    if pod.placeholder_for:
        return Cell("placeholder", f"{pod.namespace}/{pod.placeholder_for}", coming)
    return Cell("other", f"{pod.namespace}/{pod.name}", coming)


def _shapes(rows: Sequence[NodeRow]) -> tuple[ShapeRow, ...]:
    groups: dict[tuple[str, str], list[NodeRow]] = {}
    for row in rows:
        groups.setdefault((row.domain, row.shape), []).append(row)
    out = []
    for (domain, shape), members in sorted(groups.items()):
        counts: dict[str, int] = {}
        for row in members:
            for cell in row.cells:
                counts[cell.kind] = counts.get(cell.kind, 0) + 1
        out.append(ShapeRow(
            shape=shape, domain=domain, nodes=len(members),
            gpus=sum(len(r.cells) for r in members), counts=counts,
            cordoned=sum(1 for r in members if r.cordoned),
            tainted=sum(1 for r in members if r.taints),
        ))
    return tuple(out)
