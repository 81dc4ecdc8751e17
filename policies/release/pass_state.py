"""One planning pass's working state: the fleet as this pass has used it so far, the
nodes held for waiting gangs, the releases, pins and deadlines decided, and the
gangs waiting for room in order (`plan.plan` applies the rules to it gang by gang).

Pure and mutable within one pass only: a new `Pass` per `plan()` call. No I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..autoscaling.asking import Asking
from ..cluster.capacity import Capacity
from ..cluster.fleet import Fleet
from ..cluster.observed_gangs import GangObservation, PodInfo
from ..model import Placement
from ..names import PIN_LABEL
from ..settings.config import Config
from .pinning import pins_for
from .preemption import Preempting
from .queue import Place, places
from .recovery import Requeue
from .results import Release, State, WaitCode


def _release(
    gang: GangObservation, members: Sequence[PodInfo], fleet: Fleet, pin: bool, unpinned: str
) -> Release:
    placed: list[tuple[PodInfo, str | None]] = []
    for member in members:
        # Released members will be scheduled soon: count them as using GPUs now.
        if not member.node_name:
            placed.append((member, fleet.place(member, pinnable=pin)))
    pins = pins_for(placed, fleet).pins if pin else {}
    return Release(gang, tuple(members), gang.backend != "gate", pins, unpinned)


def members_that_fit(
    members: Sequence[PodInfo], fleet: Fleet, least: int, pin: bool, plain: bool = False
) -> list[tuple[PodInfo, str | None]] | None:
    """Members beyond minMember released as they fit: those that fit now, smallest
    first, placed on the fleet (with the node, None when not placed); None (and
    nothing placed) when fewer than `least` do. With `plain` (a gang without GPUs)
    members are placed by what they request, pinned or not."""
    chosen: list[tuple[PodInfo, str | None]] = []
    for member in sorted(members, key=lambda m: (sum(m.demand.values()), m.created, m.name)):
        if member.node_name or not (member.demand or plain):
            chosen.append((member, None))
            continue
        node = fleet.place(member, pinnable=pin or plain)
        if node is not None:
            chosen.append((member, node))
    if len(chosen) < least:
        for member, node in chosen:
            if node is not None:
                fleet.unplace(member.uid, node, member.demand, member.requests)
        return None
    return chosen


Outcome = tuple[State, WaitCode, str]


@dataclass
class Trace:
    """What one gang's decision did to its pass beside the fleet (a planner records it
    to replay the decision in a later pass: `release.replay`)."""

    #: Every deadline it waits for (`Pass.until`), past ones included.
    deadlines: list[float] = field(default_factory=list)
    #: It read the clock itself (`Pass.clocked`): valid for its instant only.
    clocked: bool = False
    #: The nodes it held, per `Pass.hold` call.
    holds: list[tuple[str, ...]] = field(default_factory=list)


@dataclass
class Pass:
    """What one planning pass accumulates: simulated placements, holds, releases."""

    fleet: Fleet
    config: Config
    asking: Asking
    preempting: Preempting
    holders: dict[str, GangObservation] = field(default_factory=dict)
    releases: list[Release] = field(default_factory=list)
    requeues: list[Requeue] = field(default_factory=list)
    now: float = 0.0
    _ever: Capacity | None = None
    #: Pod uid → node pinned to by this pass's releases, per gang.
    pins: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    _by_host: dict[str, str] | None = None
    #: `Plan.valid_until`, lowered by each deadline a decision of this pass waits for.
    valid_until: float = math.inf
    #: Told of each release the moment it is decided (`plan`'s `on_release`).
    on_release: Callable[[Release], None] | None = None
    #: When set, the decision under way records into it (`Trace`).
    trace: Trace | None = None
    #: Gang key → (gang, its pins, its member → node), kept by a planner from pass to
    #: pass while the nodes do not change (`plan._assignment`); None: not kept.
    assignments: dict[tuple[str, str], tuple[GangObservation, dict[str, str], Any]] | None = None

    #: Bumped whenever `holders` changes: it dates the `held_by` answers.
    holds: int = 0
    _held_by: dict[tuple[frozenset[Placement], bool, int], list[str]] = field(
        default_factory=dict
    )
    #: The gangs waiting for room, in order, with the placements they wait with and
    #: whether they are without GPUs (what they hold: `queue`).
    waiting: list[tuple[GangObservation, frozenset[Placement], bool]] = field(
        default_factory=list
    )

    def until(self, at: float) -> None:
        """A decision of this pass changes at `at` (epoch seconds) if nothing else does;
        a deadline already passed changes nothing more."""
        if self.trace is not None:
            self.trace.deadlines.append(at)
        if at > self.now:
            self.valid_until = min(self.valid_until, at)

    def clocked(self) -> None:
        """A decision of this pass reads the clock itself: valid for this instant only."""
        if self.trace is not None:
            self.trace.clocked = True
        self.valid_until = self.now

    def hold(self, names: Iterable[str], gang: GangObservation) -> None:
        """These nodes are held for `gang` from now on in this pass."""
        held = list(names)
        if self.trace is not None and held:
            self.trace.holds.append(tuple(held))
        for name in held:
            self.holders[name] = gang
        if held:
            self.holds += 1

    def held_by(self, placements: frozenset[Placement], plain: bool = False) -> list[str]:
        """The earlier gangs holding nodes these placements may use, by name (waiting
        gangs with equal placements ask the same; the answer holds until a hold)."""
        key = (placements, plain, self.holds)
        found = self._held_by.get(key)
        if found is None:
            found = self._held_by[key] = sorted(
                {
                    f"{self.holders[n].namespace}/{self.holders[n].name}"
                    for p in placements
                    for n in self.fleet.eligible(p, held=True, plain=plain)
                }
            )
        return found

    def queue(self) -> dict[tuple[str, str], Place]:
        """Each gang waiting for room: its place among those waiting for nodes it may
        use (`queue.places`; one node set per distinct placement mix, shared)."""
        sets: dict[tuple[frozenset[Placement], bool], frozenset[str]] = {}

        def nodes(mix: frozenset[Placement], plain: bool) -> frozenset[str]:
            found = sets.get((mix, plain))
            if found is None:
                found = sets[(mix, plain)] = frozenset(
                    n for p in mix for n in self.fleet.may_use(p, plain=plain)
                )
            return found

        return places(
            (gang.key, f"{gang.namespace}/{gang.name}", nodes(mix, plain))
            for gang, mix, plain in self.waiting
        )

    def node_of_host(self, host: str) -> str:
        """The node whose hostname label is `host` (the host itself when none is): where
        an earlier version's hostname pin points."""
        if self._by_host is None:
            self._by_host = {
                f.labels.get(PIN_LABEL, ""): n for n, f in self.fleet.nodes.items()
            }
        return self._by_host.get(host, host)

    def ever(self) -> Capacity:
        """The empty cluster of the nodes the fleet knows (built once per pass unless
        the planner gave its kept one); read only."""
        if self._ever is None:
            self._ever = Capacity(self.config)
            for facts in self.fleet.nodes.values():
                self._ever.upsert_facts(facts)
        return self._ever

    def pinning(self, gang: GangObservation) -> bool:
        """Whether this gang's members are pinned to the nodes the plan chose."""
        return gang.backend == "gate" and self.config.placement_for(gang.namespace) == "pinned"

    def release(
        self,
        gang: GangObservation,
        pods: Sequence[PodInfo],
        placed: bool,
        pins: Mapping[str, str] | None = None,
        unpinned: str = "",
    ) -> None:
        """Release `pods` (placed on the fleet unless `placed`), placeholders first."""
        if placed:
            release = Release(gang, tuple(pods), False, pins or {}, unpinned)
        else:
            pin = self.pinning(gang) and not unpinned
            release = _release(gang, pods, self.fleet, pin, unpinned)
        placeholders, annotations = self.asking.released(gang), self.asking.consume(gang)
        if placeholders or annotations:
            release = replace(release, placeholders=placeholders, annotations=annotations)
        self.releases.append(release)
        if self.on_release is not None:
            self.on_release(release)
        self.pins.setdefault(gang.key, {}).update(release.pins)

    def release_fitting(
        self, gang: GangObservation, chosen: Sequence[tuple[PodInfo, str | None]]
    ) -> None:
        pins = pins_for(chosen, self.fleet).pins if self.pinning(gang) else {}
        self.release(gang, [pod for pod, _ in chosen], placed=True, pins=pins)
