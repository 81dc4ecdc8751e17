"""Could this gang ever run on the cluster's GPUs, and does it fit the free GPUs now?

`check_gang(gang, capacity)` rejects only what is *proven* impossible on the empty
cluster (every live node at its allocatable, plus declared pools): a false rejection
blocks a real job, a false admission only lets a job wait. Per GPU resource, never
summed across resources, it applies in order:

1. no node the role may use at all (code `no-eligible-nodes`);
2. total demand vs the GPUs of the nodes the roles may use, for the whole gang, each
   role and (few roles) every subset of roles — Hall's condition (`total-demand`);
3. a member bigger than every node its role may use (`member-too-big`);
4. per role, exact packing of identical members: Σ over nodes of
   min over resources floor(node GPUs / member GPUs) ≥ members (`packing`); exact
   for a homogeneous gang, including several GPU resources per pod;
5. several roles: a branch-and-bound search over node bins with a node budget
   (`packing.search`); it rejects only when the search completes without a
   placement (`packing`), and admits when the budget runs out (undecided).

6. the other resources the scheduler checks (cpu, memory, ephemeral-storage): a
   member no eligible node can hold with its GPUs, or a gang needing more than its
   nodes offer (`resource_fit`); a gang without any GPU demand is checked by this
   rule alone, on every node (with GPUs or not) its members may use;
7. `gangkeeper.io/topology-required`: no single domain of the key could hold the
   gang's GPUs (`topology_fit`).

minMember: only `min_member` members must be placed together. Members without GPU
demand are always placeable, so they are counted first. When the GPU roles are
totally ordered by "easier" (demand ≤ componentwise and allowed on a superset of
nodes), the cheapest members are exactly the easiest subset: those are checked with
all of the above. Otherwise the choice of members is left to the search (each member
may be skipped while the skip budget lasts), and the bounds use only what every
subset must satisfy: enough members fit some node alone, and the smallest demands
of `min_member` fittable members fit the total GPUs.

`fits_now(gang, capacity)` runs the same code on free capacity (GPUs not used by
bound pods, cordons and every taint in force): True unless proven impossible now.
When no GPU node and no pool is known, the gang is admitted with a warning.

Pure: works on `Gang` and `Capacity`; no I/O. The search itself is `packing`'s.
`check_gang` remembers recent answers in memory per capacity version (in
`Capacity.verdicts`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import combinations, pairwise

from ..cluster.capacity import Capacity
from ..cluster.node_shapes import Bin
from ..dra.resource_names import resource_text
from ..memo import MISSING
from ..model import Gang, Placement, Verdict
from .packing import Item, Outcome, Problem, per_node, search
from .resource_fit import check_resources
from .topology_fit import check_topology
from .warning_text import MAX_WARNING, fit_warning

#: Hall's condition is checked on every subset of roles up to this many roles.
MAX_SUBSET_ROLES = 6
#: The multiplication sign of messages ("8 TIMES 1 nvidia.com/gpu"), spelled out so
#: linters do not take it for a letter x.
TIMES = "\u00d7"
#: Node lists longer than this are summarised as count x amount.
_LIST_NODES = 8


@dataclass(frozen=True)
class _Finding:
    outcome: Outcome
    code: str = ""
    reason: str = ""


def _gpu_roles(gang: Gang, capacity: Capacity) -> tuple[list[Item], int]:
    """GPU-demanding roles as items (merged when identical) and the zero-GPU count."""
    merged: dict[tuple[tuple[tuple[str, int], ...], Placement], tuple[list[str], int]] = {}
    no_gpu = 0
    for role in gang.roles:
        if role.count <= 0:
            continue
        demand = tuple(
            sorted(
                (r, a)
                for r, a in role.demand.items()
                if a > 0 and capacity.config.is_gpu_resource(r)
            )
        )
        if not demand:
            no_gpu += role.count
            continue
        names, count = merged.get((demand, role.placement), ([], 0))
        merged[(demand, role.placement)] = ([*names, role.name], count + role.count)
    items = [
        Item(name=" + ".join(names), count=count, demand=demand, placement=placement)
        for (demand, placement), (names, count) in merged.items()
    ]
    return items, no_gpu


def _problem(
    gang: Gang, roles: tuple[list[Item], int], capacity: Capacity, view: str
) -> Problem | None:
    """The packing problem for a view; None when nothing has to be checked."""
    items, no_gpu = roles
    gpu_members = sum(i.count for i in items)
    needed = max(0, min(gang.min_member, gang.size) - no_gpu)
    if needed == 0 or not items:
        return None
    bins = tuple(capacity.bins([i.placement for i in items], view=view))
    scope = ""
    if needed < gpu_members:
        scope = f" (minMember {gang.min_member} of {gang.size})"
        chain = _easiest_first(items, bins)
        if chain is not None:
            # The cheapest members are the easiest subset to place: checking exactly
            # them decides the question, with every bound below.
            kept: list[Item] = []
            left = needed
            for item in chain:
                take = min(left, item.count)
                if take:
                    kept.append(Item(item.name, take, item.demand, item.placement))
                left -= take
            return Problem(tuple(kept), bins, 0, scope)
    return Problem(tuple(items), bins, gpu_members - needed, scope)


def _easiest_first(items: Sequence[Item], bins: Sequence[Bin]) -> list[Item] | None:
    """Items sorted so each is at least as easy as the next, or None if incomparable."""

    def easier(a: int, b: int) -> bool:
        da, db = dict(items[a].demand), dict(items[b].demand)
        if any(da.get(r, 0) > db.get(r, 0) for r in set(da) | set(db)):
            return False
        return all(a in bn.eligible for bn in bins if b in bn.eligible)

    def reach(i: int) -> int:
        return sum(bn.count for bn in bins if i in bn.eligible)

    # Ties in total demand go to the more widely allowed item first.
    order = sorted(range(len(items)), key=lambda i: (sum(a for _, a in items[i].demand), -reach(i)))
    for first, second in pairwise(order):
        if not easier(first, second):
            # Sorting by total puts a dominating item later; if two neighbours are
            # incomparable there is no chain at all.
            return None
    return [items[i] for i in order]


# -- messages -------------------------------------------------------------------------


def _nodes_text(bins: Sequence[Bin], resource: str) -> str:
    """The nodes' amounts of one resource: "2 nodes: 4+1", or "40 nodes: 32x8+8x4"."""
    amounts = sorted(
        ((b.amount(resource), b.count) for b in bins if b.count and b.amount(resource)),
        reverse=True,
    )
    total = sum(n for _, n in amounts)
    if not total:
        return f"no node it may use has {resource_text(resource)}"
    merged: dict[int, int] = {}
    for amount, n in amounts:
        merged[amount] = merged.get(amount, 0) + n
    if total <= _LIST_NODES:
        listing = "+".join(str(a) for a, n in merged.items() for _ in range(n))
    else:
        listing = "+".join(f"{n}{TIMES}{a}" for a, n in merged.items())
    return f"{total} {'node' if total == 1 else 'nodes'}: {listing}"


def _demand_text(items: Sequence[Item], resource: str) -> str:
    parts = [(i.count, i.needs(resource)) for i in items if i.needs(resource)]
    total = sum(c * a for c, a in parts)
    terms = " + ".join(f"{c} {TIMES} {a}" for c, a in parts)
    return f"{terms} {resource_text(resource)} = {total}"


def _who(gang: Gang, problem: Problem, items: Sequence[Item]) -> str:
    base = f"gang {gang.namespace}/{gang.name}{problem.scope}"
    if len(items) == len(problem.items) or len(problem.items) == 1:
        return base
    roles = ", ".join(i.name for i in items)
    return f"{base} (role{'s' if len(items) > 1 else ''} {roles})"


# -- the checks ---------------------------------------------------------------------------


def _eligible(problem: Problem, indexes: Sequence[int]) -> list[Bin]:
    wanted = set(indexes)
    return [b for b in problem.bins if b.eligible & wanted]


def _capacity_bounds(gang: Gang, problem: Problem) -> _Finding | None:
    """Rules 1 and 2: eligibility and total demand, for every subset of roles."""
    items = problem.items
    for index, item in enumerate(items):
        # With members to spare, a role no node admits may simply be left out.
        if not problem.skips and not any(index in b.eligible for b in problem.bins):
            nodes = sum(b.count for b in problem.bins)
            return _Finding(
                Outcome.IMPOSSIBLE,
                "no-eligible-nodes",
                f"{_who(gang, problem, [item])} needs {_demand_text([item], item.demand[0][0])}"
                f"; none of the {nodes} GPU nodes matches its nodeSelector, "
                "node affinity and tolerations",
            )
    n = len(items)
    subsets: list[tuple[int, ...]] = [tuple(range(n))]
    if n > 1:
        subsets += [(i,) for i in range(n)]
    if 2 < n <= MAX_SUBSET_ROLES:
        subsets += [s for size in range(2, n) for s in combinations(range(n), size)]
    for subset in subsets:
        chosen = [items[i] for i in subset]
        bins = _eligible(problem, subset)
        resources = sorted({r for item in chosen for r, _ in item.demand})
        for resource in resources:
            need = sum(item.count * item.needs(resource) for item in chosen)
            if problem.skips:
                # Any minMember subset still needs the smallest demands of that many.
                sizes = sorted(a for item in chosen for a in [item.needs(resource)] * item.count)
                need = sum(sizes[: max(0, len(sizes) - problem.skips)])
            have = sum(b.count * b.amount(resource) for b in bins)
            if need > have:
                return _Finding(
                    Outcome.IMPOSSIBLE,
                    "total-demand",
                    f"{_who(gang, problem, chosen)} needs {_demand_text(chosen, resource)}; "
                    f"the nodes it may use hold at most {have} ({_nodes_text(bins, resource)})",
                )
    return None


def _member_bounds(gang: Gang, problem: Problem) -> _Finding | None:
    """Rules 3 and 4: a member that fits no node; identical members that cannot pack."""
    placeable = 0
    for index, item in enumerate(problem.items):
        bins = _eligible(problem, [index])
        slots = sum(b.count * per_node(item.demand, b.gpu_map) for b in bins)
        placeable += min(slots, item.count)
        if problem.skips:
            continue
        wants = " + ".join(f"{a} {resource_text(r)}" for r, a in item.demand)
        if slots == 0:
            largest = ", ".join(f"{max(b.amount(r) for b in bins)} {resource_text(r)}"
                                for r, _ in item.demand)
            return _Finding(
                Outcome.IMPOSSIBLE,
                "member-too-big",
                f"{_who(gang, problem, [item])}: each member needs {wants}; the largest "
                f"node it may use has {largest}",
            )
        if slots < item.count:
            resource = item.demand[0][0]
            return _Finding(
                Outcome.IMPOSSIBLE,
                "packing",
                f"{_who(gang, problem, [item])} needs {item.count} members of {wants}; the "
                f"nodes it may use fit only {slots} ({_nodes_text(bins, resource)})",
            )
    needed = sum(i.count for i in problem.items) - problem.skips
    if placeable < needed:
        return _Finding(
            Outcome.IMPOSSIBLE,
            "member-too-big",
            f"gang {gang.namespace}/{gang.name}{problem.scope} needs {needed} members placed; "
            f"at most {placeable} can be placed on the nodes they may use",
        )
    return None


def _decide(gang: Gang, problem: Problem) -> _Finding:
    finding = _capacity_bounds(gang, problem) or _member_bounds(gang, problem)
    if finding is not None:
        return finding
    if len(problem.items) == 1 and not problem.skips:
        # Rules 1 to 4 are exact for identical members.
        return _Finding(Outcome.FITS)
    outcome = search(problem)
    if outcome is Outcome.IMPOSSIBLE:
        resources = sorted({r for i in problem.items for r, _ in i.demand})
        bins = _eligible(problem, range(len(problem.items)))
        demand = "; ".join(_demand_text(problem.items, r) for r in resources)
        nodes = "; ".join(_nodes_text(bins, r) for r in resources)
        return _Finding(
            Outcome.IMPOSSIBLE,
            "packing",
            f"gang {gang.namespace}/{gang.name}{problem.scope} needs {demand}; its members "
            f"cannot be packed onto the nodes they may use ({nodes})",
        )
    return _Finding(outcome)


def _evaluate(
    gang: Gang, roles: tuple[list[Item], int], capacity: Capacity, view: str
) -> tuple[_Finding, Problem | None]:
    problem = _problem(gang, roles, capacity, view)
    if problem is None:
        return _Finding(Outcome.FITS), None
    return _decide(gang, problem), problem


def _wait_warning(gang: Gang, capacity: Capacity, problem: Problem | None) -> str:
    name = f"{gang.namespace}/{gang.name}"
    if len(name) > 40:
        name = name[:39] + "…"
    if problem is not None:
        every = range(len(problem.items))
        for resource in sorted({r for i in problem.items for r, _ in i.demand}):
            need = sum(i.count * i.needs(resource) for i in problem.items)
            free = sum(b.count * b.amount(resource) for b in _eligible(problem, every))
            if free < need:
                text = (
                    f"gang {name} fits the cluster but only {free} of the {need} "
                    f"{resource_text(resource)} it needs are free now; it will wait"
                )
                if len(text) > MAX_WARNING:
                    # Too long to keep whole: what happens first, the numbers after.
                    text = (f"gang {name} will wait: {free} of {need} "
                            f"{resource_text(resource)} free now")
                return fit_warning(text)
    return fit_warning(f"gang {name} fits the cluster but not the GPUs free now; it will wait")


def _check_ever(
    gang: Gang, capacity: Capacity, roles: tuple[list[Item], int]
) -> Verdict | None:
    """The verdict decided on the "ever" view alone; None when the free view decides."""
    if not roles[0]:
        # No member asks for GPUs: only what it asks of cpu, memory, ... can be
        # proven impossible, over every node (`resource_fit`). No GPU bins: cheap.
        other = check_resources(gang, capacity)
        if other is not None:
            return Verdict(allowed=False, reason=other[1], code=other[0])
        return Verdict(allowed=True)
    if capacity.unknown:
        return Verdict(
            allowed=True,
            warnings=(
                fit_warning(
                    f"no GPU nodes or pools known; gang {gang.namespace}/{gang.name} "
                    "was not checked for capacity"
                ),
            ),
        )
    finding, _ = _evaluate(gang, roles, capacity, "ever")
    if finding.outcome is Outcome.IMPOSSIBLE:
        return Verdict(allowed=False, reason=finding.reason, code=finding.code)
    other = check_resources(gang, capacity)
    if other is not None:
        return Verdict(allowed=False, reason=other[1], code=other[0])
    domain = check_topology(gang, capacity)
    if domain is not None:
        if not domain[0]:
            return Verdict(allowed=False, reason=domain[1], code="topology")
        return Verdict(allowed=True, warnings=(fit_warning(domain[1]),))
    if finding.outcome is Outcome.UNDECIDED:
        # The search ran out on the empty cluster; a second search on free capacity
        # would double the time for a warning only.
        return Verdict(allowed=True)
    return None


def _check_free(gang: Gang, capacity: Capacity, roles: tuple[list[Item], int]) -> Verdict:
    """The verdict of a gang that fits the empty cluster: a warning if not now."""
    now, free_problem = _evaluate(gang, roles, capacity, "free")
    if now.outcome is Outcome.IMPOSSIBLE:
        return Verdict(allowed=True, warnings=(_wait_warning(gang, capacity, free_problem),))
    return Verdict(allowed=True)


def gang_value(gang: Gang) -> Hashable:
    """Everything of `gang` a verdict depends on, hashable (its roles' mappings as
    sorted items): equal for equal gangs, whatever object each is."""
    roles = tuple(
        (r.name, r.count, tuple(sorted(r.demand.items())), r.placement, r.later,
         tuple(sorted(r.requests.items())))
        for r in gang.roles
    )
    return (gang.namespace, gang.name, gang.min_member, roles, gang.source,
            gang.recognizer, gang.topology, gang.keyed_by)


def check_gang(gang: Gang, capacity: Capacity) -> Verdict:
    """Admit unless the gang is proven unable to run even on the empty cluster.

    Answers are remembered per gang object and view version in the capacity's own
    memo (`Capacity.verdicts`): every pod of a gang asks about the same `Gang` object
    (the recognisers remember an owner's gangs), and nothing the answer depends on
    changes until the view does (the "ever" view with nodes and pools only, the
    "free" view also with bound pods); "ever" answers are also kept by the gang's
    value (`gang_value`, `Capacity.ever_verdicts`). The versions are read before computing, so an
    update racing with the computation only makes the remembered answer unreachable,
    never stale.
    """
    ever_version = capacity.version("ever")
    ever = capacity.verdicts.lookup(("ever", ever_version), gang)
    roles: tuple[list[Item], int] | None = None
    if ever is MISSING:
        # Another object of equal value (a planning pass builds each waiting gang's
        # model afresh) has the same answer on the same view.
        by_value = (ever_version, gang_value(gang))
        ever = capacity.ever_verdicts.lookup(by_value)
        if ever is MISSING:
            roles = _gpu_roles(gang, capacity)
            ever = _check_ever(gang, capacity, roles)
            capacity.ever_verdicts.put(by_value, ever)
        capacity.verdicts.put(("ever", ever_version), gang, ever)
    if ever is not None:
        return ever
    free_version = capacity.version("free")
    free = capacity.verdicts.lookup(("free", free_version), gang)
    if free is MISSING:
        free = _check_free(gang, capacity, roles or _gpu_roles(gang, capacity))
        capacity.verdicts.put(("free", free_version), gang, free)
    assert free is not None  # the free view always decides
    return free


def fits_now(gang: Gang, capacity: Capacity) -> bool:
    """Whether the gang fits the GPUs free right now (True unless proven otherwise)."""
    roles = _gpu_roles(gang, capacity)
    if not roles[0] or capacity.unknown:
        return True
    finding, _ = _evaluate(gang, roles, capacity, "free")
    return finding.outcome is not Outcome.IMPOSSIBLE
