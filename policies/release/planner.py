"""`Planner`: the controller's planning from one pass to the next.

`plan()` is a pure function of the cluster; a controller calls it again and again on
caches that mostly did not change. The planner keeps, between passes, what can only
change when its input object does: each Node's facts (`nodes.read_node`: labels,
taints, quantities parsed), read again only when the Node dict is another object (or
the same object at another resourceVersion). The caller never edits a Node dict in
place: a changed Node is a new dict, as the informer's store hands them out.
Everything else is decided afresh every pass, so a pass of the planner decides
exactly what `plan()` from scratch decides on the same state (`bench.planning` and
`tests/property/test_planner_properties.py` compare them; `decisions` is what they
compare, and the controller's periodic cross-check too).

Pure: the dicts and `PodInfo`s the caller holds in, `Plan` out; no I/O. Owned by one
controller; not thread-safe (one reconciler thread plans).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..autoscaling.asking import Backoff
from ..autoscaling.provisioning import RequestInfo
from ..cluster.node_facts import NodeFacts, read_node
from ..cluster.observed_gangs import PodInfo
from ..settings.config import Config
from .budgets import Budget
from .plan import Plan, plan

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

    def _read(self, raw: Mapping[str, Any]) -> NodeFacts:
        meta = raw.get("metadata")
        version = str(meta.get("resourceVersion", "")) if isinstance(meta, Mapping) else ""
        entry = self._facts.get(id(raw))
        if entry is None or entry[0] is not raw or entry[1] != version:
            self.nodes_read += 1
            entry = (raw, version, read_node(raw, self.config))
        self._seen[id(raw)] = entry
        return entry[2]

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
    ) -> Plan:
        """`plan.plan` on this state, with the Node facts of earlier passes re-used."""
        self._seen, self.nodes_read = {}, 0
        result = plan(pods, nodes, self.config, now, backoff, requests=requests,
                      reader=self._read, leaving=leaving, budgets=budgets)
        # Only the Nodes of this pass stay: a deleted Node's entry goes with the pass.
        self._facts = self._seen
        return result
