"""`Planner`: the controller's planning from one pass to the next.

`plan()` is a pure function of the cluster; a controller calls it again and again on
caches that mostly did not change. The planner keeps, between passes, what can only
change when its input object does: each Node's facts (`nodes.read_node`: labels,
taints, quantities parsed), read again only when the Node dict is another object (or
the same object at another resourceVersion). The caller never edits a Node dict in
place: a changed Node is a new dict, as the informer's store hands them out.

And it keeps the last plan. A caller that knows its pods and Nodes did not change
since the last pass (the controller's stores count their changes) says so with the
same `version`; when every other input is equal too, the last plan had nothing to do
(`Plan.quiet`) and no deadline it waits for has come (`Plan.valid_until`), the pass is
that plan with the gangs' ages moved on, decided in microseconds instead of a pass
over every gang: the resync of a settled cluster costs nothing. Anything else is
decided afresh, so a pass of the planner decides exactly what `plan()` from scratch
decides on the same state (`bench.planning` and
`tests/property/test_planner_properties.py` compare them; `decisions` is what they
compare, and the controller's periodic cross-check too).

Pure: the dicts and `PodInfo`s the caller holds in, `Plan` out; no I/O. Owned by one
controller; not thread-safe (one reconciler thread plans).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..autoscaling.asking import Backoff
from ..autoscaling.provisioning import RequestInfo
from ..cluster.kept_capacity import KeptCapacity
from ..cluster.node_facts import NodeFacts, read_node
from ..cluster.observed_gangs import PodInfo
from ..errors import PolicyError
from ..settings.config import Config
from .budgets import Budget
from .plan import plan
from .results import GangReport, Plan, Release

#: (the Node dict, its resourceVersion, its facts); the dict is kept so its id stays
#: its own while the entry lives.
_Entry = tuple[Mapping[str, Any], str, NodeFacts]


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
        #: Nodes read (not found kept) in the last pass: what the cache saves.
        self.nodes_read = 0
        #: The last pass: its plan, time, the caller's version and the other inputs.
        self._last: tuple[Plan, float, Hashable, tuple[Any, ...]] | None = None
        #: The last pass was the plan before it, aged (nothing changed).
        self.reused = False
        #: The nodes' capacities of the last pass, moved node by node to the next.
        self._kept = KeptCapacity(config)

    def _read(self, raw: Mapping[str, Any]) -> NodeFacts:
        meta = raw.get("metadata")
        version = str(meta.get("resourceVersion", "")) if isinstance(meta, Mapping) else ""
        # This pass's reads first: `plan` reads each Node again after `_kept` did.
        entry = self._seen.get(id(raw)) or self._facts.get(id(raw))
        if entry is None or entry[0] is not raw or entry[1] != version:
            self.nodes_read += 1
            entry = (raw, version, read_node(raw, self.config))
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
        listed = list(nodes)
        self._kept.update(self._readable(listed))
        result = plan(pods, listed, self.config, now, backoff, requests=others[1],
                      reader=self._read, leaving=leaving, budgets=budgets,
                      on_release=on_release, kept=self._kept)
        # Only the Nodes of this pass stay: a deleted Node's entry goes with the pass.
        self._facts = self._seen
        self._last = (result, now, version, others)
        return result


def aged(last: Plan, now: float) -> Plan:
    """`last` as a pass at `now` decides it when nothing changed and no deadline came:
    the same plan, each gang's age counted to `now`."""

    def older(report: GangReport) -> GangReport:
        age = max(0.0, now - report.arrived) if report.arrived else 0.0
        return replace(report, age_seconds=age)

    return replace(last, reports=tuple(older(r) for r in last.reports))
