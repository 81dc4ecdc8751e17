"""Gang-aware preemption: the lower-priority work a waiting gang may take the room of.

Gated pods never reach kube-scheduler's preemption, so the controller preempts for
them. `Preempting.choose(gang, members, later, test)` is asked by the plan for a
complete gate-backend gang that does not fit now (`plan._gate`):

- **When.** Its namespace has `preemption: lowerPriority` (the default), no member's
  PriorityClass says `preemptionPolicy: Never`, it could fit the empty cluster, and
  some bound work of lower priority sits on nodes it may use. Equal priority never
  preempts. Pods already on their way out (a deletionTimestamp, or victims of an
  earlier pass the controller remembers: `leaving`) are counted as gone first: if
  that is room enough, the gang waits for them and nothing more is preempted.
- **Whom.** Units go whole: a released gang with every member bound is one unit (all
  its members, on every node: it is requeued through its owner), a pod of no gang is
  one unit (evicted). A unit with no pod on a node the gang may use is never a
  candidate, nor a gang nobody would recreate (bare pods), nor gangkeeper's
  placeholders. The test that a set makes room is the release's own test (`fits_now`
  and, pinned, the assigner) on the fleet with the set's pods taken away, so the
  preemptor fits exactly where the victims leave room. Sets are ranked as
  kube-scheduler ranks nodes (`pickOneNodeForPreemption`,
  pkg/scheduler/framework/preemption/preemption.go): fewest PodDisruptionBudget
  violations, lowest highest-victim priority, lowest sum of victim priorities (each
  offset by 2^31, as there, so more pods weigh more), fewest victim pods, latest
  start among the highest-priority victims; then, ours, fewest GPUs taken. Up to
  `EXACT_UNITS` candidates every set is ranked and the best that makes room wins;
  beyond, the lowest priority level that makes room is found and its units are
  reprieved most important first (kube-scheduler's `selectVictimsOnNode`). Either
  way no victim is left in the set that is not needed (each is tried back).
- **Budgets.** A pod of no gang is evicted through the Eviction API, which refuses
  what a budget does not allow: a set that needs such a pod is never chosen, and
  when only such sets would make room the gang waits, naming the budget. A gang
  requeued by its owner is not an eviction; a budget it goes against only ranks the
  set lower.

Pure: the pass's `Fleet` (trial placements undone before returning), `PodInfo`s and
`GangObservation`s in, frozen values out. No I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ..cluster.fleet import Fleet
from ..cluster.observed_gangs import GangObservation, PodInfo
from ..dra.resource_names import counts_other_names
from ..model import Placement
from ..settings.config import Config
from .budgets import Budget, violations
from .recovery import Requeue, requeue_how

#: Up to this many candidate units every subset is ranked (2^12 = 4,096 rank keys).
EXACT_UNITS = 12
#: kube-scheduler's offset of each victim's priority in the sum (`math.MaxInt32 + 1`).
_PRIORITY_OFFSET = 2**31
#: Does the gang fit the fleet as it is now? (The plan's own release test.)
FitTest = Callable[[], bool]
How = Literal["suspend", "delete", "evict"]


@dataclass(frozen=True)
class Unit:
    """Work that goes together: a released gang whole, or one pod of no gang."""

    pods: tuple[PodInfo, ...]
    priority: int
    how: How
    gang: GangObservation | None = None

    @property
    def title(self) -> str:
        if self.gang is not None:
            return f"gang {self.gang.namespace}/{self.gang.name}"
        pod = self.pods[0]
        return f"pod {pod.namespace}/{pod.name}"

    @property
    def gpus(self) -> int:
        """GPUs and devices the unit takes; not a DRA class's whole node, nor the
        devices a request's selectors narrow it to, which its devices count already."""
        return sum(amount for p in self.pods for resource, amount in p.demand.items()
                   if not counts_other_names(resource))


@dataclass(frozen=True)
class Preemption:
    """The victims chosen for one waiting gang."""

    preemptor: GangObservation
    victims: tuple[Unit, ...]
    #: Budgets the gang victims go against (their requeue is not an eviction).
    budgets: tuple[str, ...] = ()

    @property
    def requeues(self) -> tuple[Requeue, ...]:
        """The victim gangs' whole-gang requeues, through their owners."""
        found: list[Requeue] = []
        for unit in self.victims:
            if unit.gang is None or unit.how == "evict":
                continue
            found.append(Requeue(
                gang=unit.gang, cause="preempted", how=unit.how, about=unit.pods,
                delete=unit.pods if unit.how == "delete" else (), whole=True, waited=0.0,
                why_whole=f"preempted by gang {self.preemptor.namespace}/"
                f"{self.preemptor.name} (priority {self.preemptor.priority})",
            ))
        return tuple(found)

    @property
    def evictions(self) -> tuple[PodInfo, ...]:
        return tuple(u.pods[0] for u in self.victims if u.how == "evict")

    @property
    def gpus(self) -> int:
        return sum(u.gpus for u in self.victims)

    @property
    def pods(self) -> tuple[PodInfo, ...]:
        return tuple(p for u in self.victims for p in u.pods)

    def summary(self) -> str:
        """'2 gangs and 1 pod of lower priority (17 GPUs): gang a/x (priority 10), ...'."""
        gangs = sum(1 for u in self.victims if u.gang is not None)
        pods = len(self.victims) - gangs
        parts = []
        if gangs:
            parts.append(f"{gangs} gang{'s' if gangs != 1 else ''}")
        if pods:
            parts.append(f"{pods} pod{'s' if pods != 1 else ''}")
        who = ", ".join(f"{u.title} (priority {u.priority})" for u in self.victims)
        return f"{' and '.join(parts)} of lower priority ({self.gpus} GPUs): {who}"


@dataclass(frozen=True)
class NoPreemption:
    """Why the gang preempts nothing; `reason` is "" when there is nothing to say (no
    lower-priority work where it could run)."""

    reason: str = ""
    #: The gang fits once pods already leaving are gone: it waits for them.
    waiting_for_leaving: int = 0


def _start(pod: PodInfo) -> float:
    return pod.started or pod.created


def rank(units: Sequence[Unit], budgets: Sequence[Budget]) -> tuple[float, ...]:
    """The order of candidate sets (lower is better): see the module docstring."""
    pods = [p for u in units for p in u.pods]
    broken, _ = violations(pods, budgets) if budgets else (0, ())
    top = max(u.priority for u in units)
    earliest = min(_start(p) for u in units if u.priority == top for p in u.pods)
    return (
        float(broken),
        float(top),
        float(sum(p.priority + _PRIORITY_OFFSET for p in pods)),
        float(len(pods)),
        -earliest,
        float(sum(u.gpus for u in units)),
    )


def _units(
    gangs: Iterable[GangObservation], pods: Iterable[PodInfo], leaving: frozenset[str]
) -> list[Unit]:
    """Every unit of bound work that could be preempted (any priority)."""
    found: list[Unit] = []
    for gang in gangs:
        members = gang.members
        if not members or any(not m.bound or m.gated or m.uid in leaving for m in members):
            continue  # waiting, being placed, or on its way out already
        how = requeue_how(gang)
        if how == "report":
            continue  # nothing would recreate its pods
        found.append(Unit(members, gang.priority, how, gang))
    for pod in pods:
        if pod.gang or pod.placeholder_for or not pod.bound or pod.deleting:
            continue
        if pod.uid in leaving:
            continue
        found.append(Unit((pod,), pod.priority, "evict"))
    return found


class Preempting:
    """One pass's preemption: its candidates, built on first use, and the victims
    already chosen by earlier (more important) gangs of the pass."""

    def __init__(
        self,
        fleet: Fleet,
        config: Config,
        gangs: Sequence[GangObservation],
        pods: Sequence[PodInfo],
        *,
        leaving: frozenset[str] = frozenset(),
        budgets: Sequence[Budget] = (),
        lowest: float | None = None,
    ) -> None:
        """`lowest`: `Preempting.lowest` when known already (a planner's, from a pass of
        the same pods and `leaving`)."""
        self.fleet = fleet
        self.config = config
        self._gangs = gangs
        self._pods = pods
        self._leaving = leaving
        self.budgets = tuple(budgets)
        self._candidates: list[Unit] | None = None
        self._gone: list[PodInfo] | None = None
        self._lowest: float | None = lowest
        self._taken: set[str] = set()
        self._enough = _Enough({}, {}, frozenset())
        self.preemptions: list[Preemption] = []
        #: `choose` calls, and those that looked past `lowest` (a planner replays a
        #: decision that only compared its priority with `lowest`: `release.replay`).
        self.asked = 0
        self.looked = 0

    @property
    def taken(self) -> set[str]:
        """uids of the victims chosen so far in this pass (read only)."""
        return self._taken

    @property
    def candidates(self) -> list[Unit]:
        if self._candidates is None:
            self._candidates = _units(self._gangs, self._pods, self._leaving)
        return self._candidates

    @property
    def leaving_pods(self) -> list[PodInfo]:
        """Bound pods on their way out (deleting, or victims the controller remembers)."""
        if self._gone is None:
            self._gone = [
                p for p in self._pods
                if p.bound and (p.deleting or p.uid in self._leaving)
            ]
        return self._gone

    @property
    def known_lowest(self) -> float | None:
        """`lowest` if this pass worked it out (None otherwise)."""
        return self._lowest

    @property
    def lowest(self) -> float:
        """The lowest priority of any candidate or leaving pod (inf when none)."""
        if self._lowest is None:
            self._lowest = min(
                [float(u.priority) for u in self.candidates]
                + [float(p.priority) for p in self.leaving_pods],
                default=float("inf"),
            )
        return self._lowest

    def choose(
        self,
        gang: GangObservation,
        placements: Iterable[Placement],
        test: FitTest,
        *,
        need: Mapping[str, int],
        could_ever_fit: Callable[[], bool],
        plain: bool = False,
    ) -> Preemption | NoPreemption:
        """Victims for `gang`, whose members have these `placements`, or why none;
        `test` answers whether the gang fits the fleet as it is at the time of asking;
        `need`: its GPUs by resource (a set that frees too few on its nodes is not
        tried); `could_ever_fit`: it fits the empty cluster; `plain`: a gang without
        GPUs, which may use nodes without GPUs too."""
        self.asked += 1
        if self.lowest >= gang.priority:
            return NoPreemption()
        self.looked += 1
        # The nodes it may use, none held for an earlier gang.
        nodes = frozenset(
            n for p in placements for n in self.fleet.eligible(p, plain=plain)
        )
        lower = [
            u for u in self.candidates
            if u.priority < gang.priority
            and not self._taken.intersection(p.uid for p in u.pods)
            and any(p.node_name in nodes for p in u.pods)
        ]
        gone = [p for p in self.leaving_pods if p.node_name in nodes]
        if not lower and not gone:
            return NoPreemption()
        if self.config.preemption_for(gang.namespace) == "off":
            return NoPreemption("preemption is off in its namespace")
        if any(m.preemption_policy == "Never" for m in gang.members):
            return NoPreemption("its PriorityClass says preemptionPolicy: Never")
        if not could_ever_fit():
            return NoPreemption()
        with _Without(self.fleet, gone):
            if gone and test():
                return NoPreemption(
                    f"{len(gone)} pods of lower priority are leaving", len(gone)
                )
            if not lower:
                return NoPreemption()
            free = {
                r: sum(self.fleet.free_all(n).get(r, 0) for n in nodes) for r in need
            }
            self._enough = _Enough(need, free, nodes)
            chosen = self._search(lower, test)
            if chosen is None:
                return NoPreemption(self._why_not(lower, test))
        _, broken = violations([p for u in chosen for p in u.pods], self.budgets)
        found = Preemption(gang, tuple(chosen), broken)
        self._taken.update(p.uid for p in found.pods)
        self.preemptions.append(found)
        return found

    def _evictable(self, units: Sequence[Unit]) -> bool:
        """The Eviction API would let every pod of no gang in `units` go."""
        evicted = [u.pods[0] for u in units if u.how == "evict"]
        return not evicted or not self.budgets or violations(evicted, self.budgets)[0] == 0

    def _makes_room(self, units: Sequence[Unit], test: FitTest) -> bool:
        if not self._enough(units):
            return False
        with _Without(self.fleet, [p for u in units for p in u.pods]):
            return test()

    def _search(self, lower: list[Unit], test: FitTest) -> list[Unit] | None:
        if not self._makes_room(lower, test):
            return None
        if len(lower) <= EXACT_UNITS:
            chosen = self._exact(lower, test)
        else:
            chosen = self._greedy(lower, test)
        return None if chosen is None else self._reprieve(chosen, test)

    def _exact(self, lower: list[Unit], test: FitTest) -> list[Unit] | None:
        sets = [
            list(combo)
            for size in range(1, len(lower) + 1)
            for combo in itertools.combinations(lower, size)
        ]
        sets.sort(key=lambda s: rank(s, self.budgets))
        for candidate in sets:
            if self._evictable(candidate) and self._makes_room(candidate, test):
                return candidate
        return None

    def _greedy(self, lower: list[Unit], test: FitTest) -> list[Unit] | None:
        chosen: list[Unit] | None = None
        for level in sorted({u.priority for u in lower}):
            below = [u for u in lower if u.priority <= level]
            if self._evictable(below) and self._makes_room(below, test):
                chosen = below
                break
        if chosen is None:
            allowed = [u for u in lower if u.how != "evict" or self._evictable([u])]
            if not self._makes_room(allowed, test):
                return None
            chosen = allowed
        return chosen

    def _reprieve(self, chosen: list[Unit], test: FitTest) -> list[Unit]:
        """Give back every victim the gang does not need, most important first (those
        a budget covers first, as kube-scheduler reprieves PDB-violating pods first)."""
        def covered(unit: Unit) -> bool:
            return any(b.covers(p) for b in self.budgets for p in unit.pods)

        def important(unit: Unit) -> tuple[bool, int, float]:
            return (not covered(unit), -unit.priority, min(_start(p) for p in unit.pods))

        # Incremental: the fleet stays without every victim still kept, and each trial
        # puts one unit back (cost: its pods and one test, not the whole set's).
        kept = list(chosen)
        gone = [p for u in chosen for p in u.pods if p.node_name]
        for pod in gone:
            self.fleet.unplace(pod.uid, pod.node_name, pod.demand, pod.requests)
        try:
            for unit in sorted(chosen, key=important):
                trial = [u for u in kept if u is not unit]
                if not trial or not self._enough(trial):
                    continue
                back = [p for p in unit.pods if p.node_name]
                for pod in back:
                    self.fleet.add(pod.uid, pod.node_name, pod.demand, pod.requests)
                if test():
                    kept = trial  # reprieved: it stays put back
                else:
                    for pod in back:
                        self.fleet.unplace(pod.uid, pod.node_name, pod.demand, pod.requests)
        finally:
            for pod in (p for u in kept for p in u.pods if p.node_name):
                self.fleet.add(pod.uid, pod.node_name, pod.demand, pod.requests)
        return kept

    def _why_not(self, lower: list[Unit], test: FitTest) -> str:
        if self._makes_room(lower, test):
            _, broken = violations([u.pods[0] for u in lower if u.how == "evict"],
                                   self.budgets)
            return (
                "preempting lower-priority work would make room, but "
                f"PodDisruptionBudget {', '.join(broken)} allows no more disruptions"
            )
        return "preempting all lower-priority work on its nodes would not make room"


class _Enough:
    """A set frees enough GPUs on the gang's nodes to be worth a trial placement."""

    def __init__(
        self, need: Mapping[str, int], free: Mapping[str, int], nodes: frozenset[str]
    ) -> None:
        self.short = {r: n - free.get(r, 0) for r, n in need.items() if n > free.get(r, 0)}
        self.nodes = nodes

    def __call__(self, units: Sequence[Unit]) -> bool:
        for resource, short in self.short.items():
            freed = sum(
                p.demand.get(resource, 0)
                for u in units for p in u.pods if p.node_name in self.nodes
            )
            if freed < short:
                return False
        return True


class _Without:
    """The fleet with `pods` taken away for the block (their room free), put back after."""

    def __init__(self, fleet: Fleet, pods: Sequence[PodInfo]) -> None:
        self.fleet = fleet
        self.pods = [p for p in pods if p.node_name]

    def __enter__(self) -> None:
        for pod in self.pods:
            self.fleet.unplace(pod.uid, pod.node_name, pod.demand, pod.requests)

    def __exit__(self, *_: object) -> None:
        for pod in self.pods:
            self.fleet.add(pod.uid, pod.node_name, pod.demand, pod.requests)
