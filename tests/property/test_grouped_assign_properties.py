"""The grouped assigner decides exactly what the node-by-node assigner decided.

`assign` now searches buckets of interchangeable nodes, and the controller's fleet
hands it groups it keeps between gangs (`Fleet.groups`). On random fleets (labels,
taints, cordons, not Ready, names out of order, free amounts) and gangs
(mixed sizes and selectors, small search budgets so the greedy fallback runs too):
(a) `assign` returns what the assigner before it returned (`builders.assign_reference`,
the code of commit b2ba8e8), and (b) assigning over a `Fleet`'s groups returns what
assigning over its node views returns.
"""

from __future__ import annotations

import pytest
from builders.assign_reference import assign_reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangkeeper.policies import Config
from gangkeeper.policies.assigner import Member, NodeView, assign
from gangkeeper.policies.assigner.assign import assign_groups
from gangkeeper.policies.cluster.fleet import Fleet
from gangkeeper.policies.cluster.node_facts import UNSCHEDULABLE_TAINT
from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.model import Placement, Taint
from gangkeeper.webhook.sandbox.nodes import gpu_node

pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)
GPU = "nvidia.com/gpu"
POOLS = ("a", "b")


@st.composite
def views(draw: st.DrawFn) -> list[NodeView]:
    out = []
    for i in range(draw(st.integers(0, 10))):
        taints: tuple[Taint, ...] = ()
        if draw(st.integers(0, 5)) == 0:
            taints = (Taint("dedicated", "x", "NoSchedule"),)
        if draw(st.integers(0, 8)) == 0:
            taints = (*taints, UNSCHEDULABLE_TAINT)
        name = draw(st.sampled_from([f"n{i:02d}", f"z{i}", f"a{9 - i}"]))
        out.append(NodeView(
            name=name,
            labels={"kubernetes.io/hostname": name, "pool": draw(st.sampled_from(POOLS))},
            taints=taints,
            free={GPU: draw(st.sampled_from([0, 1, 2, 4, 8])),
                  "cpu": draw(st.sampled_from([2000, 8000])), "pods": draw(st.integers(1, 4))},
            ready=draw(st.integers(0, 12)) > 0,
            unschedulable=draw(st.integers(0, 12)) == 0,
        ))
    return out


@st.composite
def gangs(draw: st.DrawFn) -> list[Member]:
    out = []
    for j in range(draw(st.integers(0, 9))):
        selector = draw(st.sampled_from([(), (("pool", "a"),), (("pool", "b"),)]))
        out.append(Member(
            f"m{j}",
            {GPU: draw(st.sampled_from([1, 2, 4, 8])),
             "cpu": draw(st.sampled_from([500, 1000, 4000])), "pods": 1},
            Placement(node_selector=selector),
        ))
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(views(), gangs(), st.sampled_from([3, 12, 20_000]))
def test_the_grouped_search_returns_what_the_node_by_node_search_returned(
    nodes: list[NodeView], members: list[Member], budget: int
) -> None:
    assert assign(members, nodes, budget=budget) == assign_reference(
        members, nodes, budget=budget
    )


def _fleet(draw: st.DrawFn) -> Fleet:
    config = Config()
    nodes = []
    for i in range(draw(st.integers(1, 12))):
        node = gpu_node(f"gpu-{i:02d}", draw(st.sampled_from([4, 8])),
                        labels={"pool": draw(st.sampled_from(POOLS))})
        if draw(st.integers(0, 6)) == 0:
            node["spec"] = {"unschedulable": True}
        nodes.append(node)
    pods = []
    for k in range(draw(st.integers(0, 20))):
        gpus = draw(st.sampled_from([1, 2, 4]))
        pods.append(pod_info({
            "metadata": {"name": f"p{k}", "namespace": "ns", "uid": f"u{k}"},
            "spec": {"nodeName": f"gpu-{draw(st.integers(0, len(nodes) - 1)):02d}",
                     "containers": [{"name": "c", "resources": {
                         "requests": {GPU: str(gpus), "cpu": "1"}}}]},
        }, config))
    fleet = Fleet(nodes, pods, config)
    if draw(st.booleans()):
        fleet.reserve([Placement(node_selector=(("pool", draw(st.sampled_from(POOLS))),))])
    return fleet


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), gangs())
def test_a_fleets_groups_assign_as_its_node_views_do(data: st.DataObject,
                                                     members: list[Member]) -> None:
    fleet = _fleet(data.draw)
    groups, names = fleet.groups()
    assert assign_groups(members, groups, names) == assign(members, fleet.views())
