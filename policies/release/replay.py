"""A pass that decides again only the gangs whose decision can differ from the last pass.

A pass (`plan.plan`) is a fold: the gangs in order, each decided on the fleet as the
gangs before it left it (their releases placed, the nodes they hold held). A gang's
decision is a function of its own members, the fleet and the pass's other state it
finds at its turn (placements, held nodes and their holders, pools claimed, victims
taken), the clock, and the cluster-wide inputs (nodes, backoff, requests, pods leaving,
budgets: when any of these changed the planner decides every gang again). So when a
gang is the same object as in the last pass (`KeptGangs`: no member changed) and finds
*the same state* at its turn, its decision is the last pass's, and so is what it does
to the state: `Replay` re-uses it (a `Step`) instead of deciding it.

"The same state" is checked exactly, by value: `Replay.diff` counts what this pass's
state holds that the last pass's held at the same point, less what the last one held
that this one does not — every placement (pod uid, node, GPUs, requests: a
`kept_fleet.Placed`, four long), held node, holder, claimed pool and taken victim
(tagged tuples of other lengths). It starts as the difference of the two passes'
starts (`KeptFleet.delta`), and at each gang adds what the gang did this pass and
subtracts what it did in the last one; gangs of the last pass that are gone subtract
theirs at their place. An empty `diff` is equal state. So a pod that went from in
flight to bound on the same node changes nothing after it, and a gang that released
last pass whose members are now in flight leaves the state as it was.

A released gang (nothing gated) is decided on its members and the clock alone (the
fleet is read only for a member stuck, which always requeues): its step is re-used
whatever the state (`Step.blind`). Any other step is re-used only when, besides:
- its decision read the clock only through deadlines (`Pass.until`), none of which has
  come (`Step.valid_until`), and not at all otherwise (`Pass.clocked`);
- it asked nothing of preemption but "is any lower-priority work there at all?"
  (`Preempting.lowest`), and the answer is still no;
- it made no requeue, preemption, autoscaler ask or ProvisioningRequest write, and the
  gang has no placeholders or requests (those decisions are taken every pass).

Re-used steps touch no fleet: their changes wait (`pending`) until a gang must be
decided, when the kept start is copied and they are applied (`Replay.fleet`); a pass
in which nothing must be decided copies nothing.

Pure: the pass's `Pass` and the last pass's `Step`s in, `Step`s out. No I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..cluster.fleet import Fleet, FleetOp
from ..cluster.kept_fleet import Placed, placed
from ..cluster.observed_gangs import GangObservation, gang_order
from .holding import hold_later
from .pass_state import Outcome, Pass, Trace
from .results import Release

#: The hold of released gangs' later members, before every gang (`plan.plan`).
PHASE_ORDER: tuple[Any, ...] = (-math.inf, 0.0, "", "")
#: After every gang.
_END: tuple[Any, ...] = (math.inf, 0.0, "", "")
Effect = Mapping[Hashable, int]
Decide = Callable[[GangObservation, Pass], Outcome]


@dataclass(frozen=True)
class Step:
    """One gang's decision in one pass, and what it did (or the later-members hold)."""

    order: tuple[Any, ...]
    gang: GangObservation | None
    outcome: Outcome
    #: Its changes to the fleet, net of trials undone, to apply again.
    ops: tuple[FleetOp, ...] = ()
    #: The nodes it held, per hold.
    holds: tuple[tuple[str, ...], ...] = ()
    #: What it added to the pass's state, counted (see the module docstring).
    effect: Effect | None = None
    releases: tuple[Release, ...] = ()
    waiting: tuple[Any, ...] = ()
    deadlines: tuple[float, ...] = ()
    decided_at: float = 0.0
    valid_until: float = math.inf
    replayable: bool = False
    #: It asked preemption only whether lowest >= this (its priority); None: not asked.
    lowest_at_least: int | None = None
    #: The later-members hold: the gangs it placed for.
    phase: tuple[GangObservation, ...] = ()
    #: Its decision read nothing of the state (a released gang, no member stuck).
    blind: bool = False


def _net(log: Sequence[FleetOp]) -> tuple[tuple[FleetOp, ...], dict[Hashable, int]]:
    """The fleet ops that remain once trials undone are taken out, and their count."""
    counts: dict[Hashable, int] = {}
    args: dict[tuple[Hashable, str], FleetOp] = {}
    reserves: list[FleetOp] = []
    for op in log:
        if op[0] == "reserve":
            reserves.append(op)
            continue
        entry = placed(op[1], op[2], op[3], op[4])
        counts[entry] = counts.get(entry, 0) + (1 if op[0] == "add" else -1)
        args.setdefault((entry, op[0]), op)
    ops: list[FleetOp] = []
    for kind, sign in (("unplace", -1), ("add", 1)):
        for key, count in counts.items():
            if count * sign > 0:
                ops.extend([args[(key, kind)]] * abs(count))
    ops.extend(reserves)
    effect = {e: n for e, n in counts.items() if n}
    for op in reserves:
        for name in op[1]:
            effect[("reserve", name)] = effect.get(("reserve", name), 0) + 1
    return tuple(ops), effect


def _holder(gang: GangObservation) -> tuple[str, str, str]:
    return (gang.namespace, gang.label, gang.name)


class Replay:
    """One pass's gangs, each re-used from the last pass or decided (module docstring)."""

    def __init__(
        self, run: Pass, base: Fleet, last: Sequence[Step], *, delta: Mapping[Placed, int],
        dirty: set[tuple[str, str]], decide: Decide, floor: float = -math.inf,
        final: Fleet | None = None,
    ) -> None:
        """`run`: this pass, its fleet `base` (the kept start, never changed here);
        `last`: the last pass's steps (none: decide every gang); `delta`: this start's
        placements against the last one's (`KeptFleet.delta`); `dirty`: gangs to decide
        whatever their object; `decide`: the rules (`plan.decide_gang`); `floor`: the
        lowest priority of any live pod (`lowest` is never below it); `final`: the last
        pass's own fleet as its gangs left it (`finish`), or None."""
        self.run, self._base, self._last, self._decide = run, base, last, decide
        self.diff: dict[Hashable, int] = {entry: n for entry, n in delta.items()}
        self._dirty = dirty
        self._live = False
        self._pending: list[Step] = []
        self._next = 0
        self._lowest: float | None = None
        self._floor = floor
        self._final = final
        self.steps: list[Step] = []
        #: Gangs re-used and decided in this pass.
        self.reused = 0
        self.decided = 0

    # -- the fleet -------------------------------------------------------------------

    def fleet(self) -> Fleet:
        """The pass's own fleet, as the gangs so far left it: made at the first gang
        decided, and the re-used steps' changes applied when a gang after them is
        decided (not at all after the last). Made from the last pass's own fleet when
        that is exactly this state (every step of the last pass passed, and the state
        equal to the one they left: a gang arriving last), else the kept start copied."""
        run = self.run
        if not self._live:
            self._live = True
            final = self._final
            if final is not None and not self.diff and self._next == len(self._last):
                run.fleet = run.preempting.fleet = final
                for step in self._pending:
                    self._hold(step)
                self._pending = []
                return final
            run.fleet = run.preempting.fleet = self._base.copy()
        if self._pending:
            run.fleet.replay(op for step in self._pending for op in step.ops)
            for step in self._pending:
                self._hold(step)
            self._pending = []
        return run.fleet

    def _hold(self, step: Step) -> None:
        if step.holds:
            assert step.gang is not None
            for names in step.holds:
                self.run.hold(names, step.gang)

    def finish(self) -> Fleet | None:
        """End of the pass: this pass's fleet when it is exactly the state every gang
        left (for the next pass, `final`), else None."""
        self._match(_END)  # the last pass's steps after every gang of this one
        if self._live:
            return None if self._pending else self.run.fleet
        return None if self.diff else self._final

    # -- the state compared ---------------------------------------------------------------

    def _count(self, effect: Effect | None, sign: int) -> None:
        diff = self.diff
        for key, n in (effect or {}).items():
            value = diff.get(key, 0) + sign * n
            if value:
                diff[key] = value
            else:
                diff.pop(key, None)

    def _match(self, order: tuple[Any, ...]) -> Step | None:
        """The last pass's step at this place; those before it that are gone count."""
        last = self._last
        while self._next < len(last) and last[self._next].order < order:
            self._count(last[self._next].effect, -1)
            self._next += 1
        if self._next < len(last) and last[self._next].order == order:
            self._next += 1
            return last[self._next - 1]
        return None

    def _lowest_at_least(self, priority: int) -> bool:
        """`Preempting.lowest >= priority`, without working it out when no live pod
        has a lower priority (`floor`: the lowest any has)."""
        if self._floor >= priority:
            return True
        if self._lowest is None:
            self._lowest = self.run.preempting.lowest
        return self._lowest >= priority

    def _reusable(self, step: Step, gang: GangObservation) -> bool:
        now = self.run.now
        return (
            step.replayable and step.gang is gang and (step.blind or not self.diff)
            and gang.key not in self._dirty and step.decided_at <= now < step.valid_until
            and (step.lowest_at_least is None or self._lowest_at_least(step.lowest_at_least))
        )

    # -- gangs -------------------------------------------------------------------------

    def later_members(self, gangs: Sequence[GangObservation]) -> None:
        """`plan.hold_later` of the released gangs' later members, before every gang."""
        last = self._match(PHASE_ORDER)
        if last is not None and not self.diff and len(last.phase) == len(gangs) and all(
            a is b for a, b in zip(last.phase, gangs, strict=True)
        ):
            self._reuse(last)
            return
        if last is not None:
            self._count(last.effect, -1)
        if not gangs:
            return
        fleet = self.fleet()
        log: list[FleetOp] = []
        fleet.log = log
        try:
            for gang in gangs:
                hold_later(gang, fleet)
        finally:
            fleet.log = None
        ops, effect = _net(log)
        step = Step(PHASE_ORDER, None, ("released", "", ""), ops=ops, effect=effect,
                    phase=tuple(gangs), replayable=True)
        self._count(effect, +1)
        self.steps.append(step)

    def decide(self, gang: GangObservation) -> Outcome:
        last = self._match(gang_order(gang))
        if last is not None and self._reusable(last, gang):
            self._reuse(last)
            return last.outcome
        if last is not None:
            self._count(last.effect, -1)  # `diff` now against the state after it
        self.fleet()
        step = self._record(gang)
        self._count(step.effect, +1)
        self.steps.append(step)
        self.decided += 1
        return step.outcome

    def _reuse(self, step: Step) -> None:
        run = self.run
        for release in step.releases:
            # What `Pass.release` does besides deciding: the asking's books, the pins.
            run.asking.released(release.gang)
            run.asking.consume(release.gang)
            run.releases.append(release)
            if run.on_release is not None:
                run.on_release(release)
            run.pins.setdefault(release.gang.key, {}).update(release.pins)
        run.waiting.extend(step.waiting)
        for at in step.deadlines:
            run.until(at)
        if step.ops or step.holds:
            self._pending.append(step)
        self.steps.append(step)
        self.reused += 1

    def _record(self, gang: GangObservation) -> Step:
        """Decide the gang, recording what it did."""
        run = self.run
        fleet, asking, preempting = run.fleet, run.asking, run.preempting
        releases, requeues = len(run.releases), len(run.requeues)
        preemptions, waiting = len(preempting.preemptions), len(run.waiting)
        asked, looked = preempting.asked, preempting.looked
        taken, claimed = set(preempting.taken), dict(asking.claimed)
        books = (len(asking.asks), len(asking.request_asks), len(asking.kept), asking.clocked)
        trace, log = Trace(), list[FleetOp]()
        run.trace, fleet.log = trace, log
        try:
            outcome = self._decide(gang, run)
        finally:
            run.trace, fleet.log = None, None
        ops, effect = _net(log)
        holder = _holder(gang)
        for names in trace.holds:
            for name in names:
                effect[("hold", name, *holder)] = effect.get(("hold", name, *holder), 0) + 1
        for uid in preempting.taken - taken:
            effect[("taken", uid)] = 1
        claims = [pool for pool, g in asking.claimed.items() if claimed.get(pool) is not g]
        for pool in claims:
            effect[("claim", pool, *_holder(asking.claimed[pool]))] = 1
        requests = asking.requests or {}
        replayable = (
            len(run.requeues) == requeues and len(preempting.preemptions) == preemptions
            and preempting.looked == looked and not trace.clocked and not claims
            and books == (len(asking.asks), len(asking.request_asks), len(asking.kept),
                          asking.clocked)
            and gang.key not in asking.by_gang and gang.key not in requests
        )
        deadlines = tuple(trace.deadlines)
        return Step(
            gang_order(gang), gang, outcome, ops=ops, holds=tuple(trace.holds),
            effect=effect, releases=tuple(run.releases[releases:]),
            waiting=tuple(run.waiting[waiting:]), deadlines=deadlines, decided_at=run.now,
            valid_until=min((at for at in deadlines if at > run.now), default=math.inf),
            replayable=replayable,
            lowest_at_least=gang.priority if preempting.asked > asked else None,
            # Rule 1 (nothing gated) reads the fleet only for a member stuck, which
            # always requeues: without a requeue the state was not read.
            blind=not gang.gated and len(run.requeues) == requeues,
        )
