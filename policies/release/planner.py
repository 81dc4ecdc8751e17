"""`Planner`: the controller's planning from one pass to the next.

`plan()` is a pure function of the cluster; a controller calls it again and again on
caches that mostly did not change. The planner keeps, between passes, what can only
change when its input object does: each Node's facts (`nodes.read_node`: labels,
taints, quantities parsed), read again only when the Node dict is another object (or
the same object at another resourceVersion). The caller never edits a Node dict in
place: a changed Node is a new dict, as the informer's store hands them out. A Node
read again whose facts are equal to the last pass's (a kubelet's status update that
changed nothing placement reads: a heartbeat, an image list, a condition's time) keeps
the last pass's facts object, so it counts as unchanged: on a large cluster some
Node's status changes in almost every pass.

And it keeps the last plan. A caller that knows its pods and Nodes did not change
since the last pass (the controller's stores count their changes) says so with the
same `version`; when every other input is equal too, the last plan had nothing to do
(`Plan.quiet`) and no deadline it waits for has come (`Plan.valid_until`), the pass is
that plan with the gangs' ages moved on, decided in microseconds instead of a pass
over every gang: the resync of a settled cluster costs nothing.

Any other pass decides again only what can differ from the last one (`_start`): the
fleet a pass starts from is moved by the pods that changed (`KeptFleet`), the gangs
are read again only when a member changed (`KeptGangs`), and each gang's decision of
the last pass is re-used while the gang and the state it finds at its turn are the
same (`replay.Replay`). So a pass costs what changed, plus a look at each pod and
gang (is it the same object?), and a pass of the planner decides exactly what
`plan()` from scratch decides on the same state (`bench.planning` and
`tests/property/test_planner_properties.py` compare them; `decisions` is what they
compare, and the controller's periodic cross-check too, which makes the planner
`forget` all it kept when they differ).

Pure: the dicts and `PodInfo`s the caller holds in, `Plan` out; no I/O. Owned by one
controller; not thread-safe (one reconciler thread plans).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple

from ..autoscaling.asking import Asking, Backoff
from ..autoscaling.provisioning import RequestInfo
from ..cluster.fleet import Fleet
from ..cluster.kept_capacity import KeptCapacity
from ..cluster.kept_fleet import KeptFleet
from ..cluster.kept_gangs import KeptGangs
from ..cluster.node_facts import NodeFacts, read_node
from ..cluster.observed_gangs import GangObservation, PodInfo
from ..errors import PolicyError
from ..settings.config import Config
from .budgets import Budget
from .pass_state import Outcome, Pass
from .plan import decide_gang, plan
from .preemption import Preempting
from .replay import Replay, Step
from .results import GangReport, Plan, Release

#: (the Node dict, its resourceVersion, its facts); the dict is kept so its id stays
#: its own while the entry lives.
_Entry = tuple[Mapping[str, Any], str, NodeFacts]


class _Inputs(NamedTuple):
    """A pass's inputs besides its pods, as `Planner._start` reads them."""

    listed: list[Mapping[str, Any]]
    nodes_changed: bool
    #: (backoff, requests, leaving, budgets), compared with the last pass's.
    others: tuple[Any, ...]
    leaving: frozenset[str]
    budgets: Sequence[Budget]


def decisions(result: Plan) -> tuple[Any, ...]:
    """What a pass decides, to compare two plans of one state: each release (gang,
    members, group, pins, why unpinned), each gang's report, the placeholders, requests,
    requeues and preemptions it asks for."""
    return (
        tuple(
            (r.gang.key, tuple(p.uid for p in r.pods), r.needs_group,
             tuple(sorted(r.pins.items())), r.unpinned, tuple(p.uid for p in r.placeholders),
             tuple(sorted(r.annotations.items())))
            for r in result.releases
        ),
        result.reports,
        result.asks,
        tuple(p.uid for p in result.orphans),
        result.request_asks,
        result.request_orphans,
        result.requeues,
        tuple((f.preemptor.key, tuple(p.uid for p in f.pods)) for f in result.preemptions),
    )


class Planner:
    """Plans pass after pass for one config, keeping each Node's facts between passes.

    Bounded by the cluster: an entry lives only while its Node was in the last pass.
    """

    def __init__(self, config: Config) -> None:
        self.config = config
        self._facts: dict[int, _Entry] = {}
        self._seen: dict[int, _Entry] = {}
        #: Each Node's facts of the last pass, by name.
        self._named: dict[str, NodeFacts] = {}
        #: Nodes read (not found kept) in the last pass: what the cache saves.
        self.nodes_read = 0
        #: The last pass: its plan, time, the caller's version and the other inputs.
        self._last: tuple[Plan, float, Hashable, tuple[Any, ...]] | None = None
        #: The last pass was the plan before it, aged (nothing changed).
        self.reused = False
        #: The nodes' capacities of the last pass, moved node by node to the next.
        self._kept = KeptCapacity(config)
        #: The last pass's Node facts, in order (the same objects: no Node changed).
        self._nodes: list[NodeFacts] = []
        #: The last pass's pods and gangs, the fleet it started from, its steps and
        #: its other inputs (backoff, requests, leaving, budgets).
        self._gangs = KeptGangs(config)
        self._fleet = KeptFleet(config)
        self._steps: Sequence[Step] = []
        self._inputs: tuple[Any, ...] | None = None
        self._assignments: dict[tuple[str, str], Any] = {}
        self._lowest: float | None = None
        #: The last pass's own fleet as its gangs left it, when complete (`Replay`).
        self._final: Fleet | None = None
        #: Gangs decided, and re-used from the pass before, in the last pass.
        self.decided = 0
        self.replayed = 0

    def _read(self, raw: Mapping[str, Any]) -> NodeFacts:
        meta = raw.get("metadata")
        version = str(meta.get("resourceVersion", "")) if isinstance(meta, Mapping) else ""
        # This pass's reads first: `plan` reads each Node again after `_kept` did.
        entry = self._seen.get(id(raw)) or self._facts.get(id(raw))
        if entry is None or entry[0] is not raw or entry[1] != version:
            self.nodes_read += 1
            facts = read_node(raw, self.config)
            before = self._named.get(facts.name)
            entry = (raw, version, before if before == facts else facts)
        self._seen[id(raw)] = entry
        return entry[2]

    def _readable(self, nodes: Iterable[Mapping[str, Any]]) -> Iterator[NodeFacts]:
        """The facts of the Nodes that can be read, as `Fleet` keeps them."""
        for raw in nodes:
            try:
                yield self._read(raw)
            except PolicyError:
                continue  # the fleet leaves it out too

    def plan(
        self,
        pods: Iterable[PodInfo],
        nodes: Iterable[Mapping[str, Any]],
        now: float,
        backoff: Backoff | None = None,
        *,
        requests: Iterable[RequestInfo] | None = None,
        leaving: frozenset[str] = frozenset(),
        budgets: Sequence[Budget] = (),
        version: Hashable | None = None,
        on_release: Callable[[Release], None] | None = None,
    ) -> Plan:
        """`plan.plan` on this state, with the Node facts of earlier passes re-used.

        `version`: the caller's token for `pods` and `nodes` — equal tokens promise
        equal pods and Nodes (None: no promise, always a full pass). `on_release`: as
        `plan.plan`'s (a re-used plan has no release to tell of)."""
        others = (
            tuple(sorted((backoff or {}).items())),
            None if requests is None else tuple(requests), leaving, tuple(budgets),
        )
        last = self._last
        if (
            version is not None and last is not None and last[2] == version
            and last[3] == others and last[1] <= now < last[0].valid_until and last[0].quiet
        ):
            self.reused, self.nodes_read = True, 0
            result = aged(last[0], now)
            self._last = (result, now, version, others)
            return result
        self._seen, self.nodes_read, self.reused = {}, 0, False
        listed, live = list(nodes), list(pods)
        facts = list(self._readable(listed))
        nodes_changed = len(facts) != len(self._nodes) or any(
            a is not b for a, b in zip(facts, self._nodes, strict=True)
        )
        self._nodes = facts
        self._kept.update(facts)
        start = None
        if self._gangs.update(live):
            # Decided again only what can differ from the last pass (`_start`).
            start = partial(self._start, _Inputs(listed, nodes_changed, others, leaving, budgets))
        else:
            self.forget()  # two pods share a uid: nothing is kept, plan from scratch
        try:
            result = plan(live, listed, self.config, now, backoff, requests=others[1],
                          reader=self._read, leaving=leaving, budgets=budgets,
                          on_release=on_release, kept=self._kept, start=start)
        except BaseException:
            self.forget()
            raise
        # Only the Nodes of this pass stay: a deleted Node's entry goes with the pass.
        self._facts = self._seen
        self._named = {entry[2].name: entry[2] for entry in self._seen.values()}
        self._last = (result, now, version, others)
        return result

    def forget(self) -> None:
        """Keep nothing of the pods and gangs: the next pass decides every gang (after a
        pass that differed from a from-scratch plan, say)."""
        self._last = None
        self._gangs = KeptGangs(self.config)
        self._fleet = KeptFleet(self.config)
        self._steps = []
        self._assignments, self._lowest, self._final = {}, None, None

    def _start(
        self, inputs: _Inputs, live: list[PodInfo], now: float,
        on_release: Callable[[Release], None] | None,
    ) -> tuple[list[GangObservation], Pass, list[Outcome]]:
        """`plan.plan`'s start from what the planner kept: the start fleet moved by the
        pods that changed (`KeptFleet`), the gangs read again only when dirty
        (`KeptGangs`), and each gang's decision re-used when it cannot differ
        (`Replay`)."""
        listed, nodes_changed, others, leaving, budgets = inputs
        kept = self._gangs
        fleet = self._fleet.update(
            listed, live, kept.changes, reader=self._read, kept=self._kept,
            nodes_changed=nodes_changed,
        )
        gangs = kept.gangs()
        backoff = dict(others[0])
        asking = Asking.of(live if kept.placeholders else (), self.config, now, backoff,
                           others[1])
        asking.spots.update(self._fleet.spots)
        same = not nodes_changed and self._inputs == others
        preempting = Preempting(
            fleet, self.config, gangs, live, leaving=leaving, budgets=budgets,
            # It counts pods and gangs only: the same while no pod changed.
            lowest=self._lowest if same and not kept.changes else None,
        )
        if nodes_changed or len(self._assignments) > 2 * len(gangs) + 64:
            self._assignments = {}  # a hostname may name another node; gangs gone
        run = Pass(fleet, self.config, asking, preempting, now=now, on_release=on_release,
                   _ever=self._kept.every, assignments=self._assignments)
        replay = Replay(run, fleet, self._steps if same else (), delta=self._fleet.delta,
                        dirty=kept.dirty, decide=decide_gang, floor=kept.floor,
                        final=self._final if same else None)
        self._final = None
        self._steps, self._inputs = [], others  # a pass that fails keeps nothing
        replay.later_members([
            g for g in gangs
            if g.later and g.backend == "gate" and g.missing_later and len(g.gated) < g.present
        ])
        outcomes = [replay.decide(gang) for gang in gangs]
        self._steps, self._lowest = replay.steps, preempting.known_lowest
        self._final = replay.finish()
        self.decided, self.replayed = replay.decided, replay.reused
        return gangs, run, outcomes


def aged(last: Plan, now: float) -> Plan:
    """`last` as a pass at `now` decides it when nothing changed and no deadline came:
    the same plan, each gang's age counted to `now`."""

    def older(report: GangReport) -> GangReport:
        # The report copied with its age moved (what `dataclasses.replace` makes, at a
        # seventh of its cost: a resync of 1,000 gangs is this loop).
        new = object.__new__(GangReport)
        new.__dict__.update(report.__dict__)
        new.__dict__["age_seconds"] = max(0.0, now - report.arrived) if report.arrived else 0.0
        return new

    return replace(last, reports=tuple(older(r) for r in last.reports))
