"""The controller's `Planner`: the same plan as `plan()` from scratch, pass after
pass, with each Node read once until it changes."""

from __future__ import annotations

from bench.planning import decisions
from bench.planning_state import EPOCH, admitted_pods, bound, infos, released, trace
from gangkeeper.policies import Config
from gangkeeper.policies.cluster.observed_gangs import SharedParts
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.planner import Planner
from gangkeeper.webhook.sandbox.nodes import gpu_node


def test_pass_after_pass_the_planner_decides_what_a_plan_from_scratch_decides() -> None:
    config = Config()
    specs, nodes = trace(40)
    pods = admitted_pods(specs, nodes, config)
    now = EPOCH + len(pods) * 0.01 + 5.0
    shared = SharedParts()
    planner = Planner(config)
    for step in range(3):
        state = infos(pods, config, shared)
        ours, full = planner.plan(state, nodes, now + step), plan(state, nodes, config, now + step)
        assert decisions(ours) == decisions(full), step
        if step == 0:
            assert ours.releases  # the burst releases what fits
            pods = released(pods, ours, now)
        elif step == 1:
            pods = bound(pods, nodes)


def test_a_node_is_read_again_only_when_it_changes() -> None:
    config = Config()
    nodes = [gpu_node(f"gpu-{i}", 8) for i in range(5)]
    planner = Planner(config)
    planner.plan([], nodes, EPOCH)
    assert planner.nodes_read == 5
    planner.plan([], nodes, EPOCH + 1)
    assert planner.nodes_read == 0
    # A cordon arrives as a new object (the informer's store never edits in place).
    cordoned = {**nodes[2], "spec": {**nodes[2].get("spec", {}), "unschedulable": True}}
    changed = [*nodes[:2], cordoned, *nodes[3:]]
    result = planner.plan([], changed, EPOCH + 2)
    assert planner.nodes_read == 1
    assert decisions(result) == decisions(plan([], changed, config, EPOCH + 2))


def test_a_deleted_node_is_forgotten_with_the_pass() -> None:
    config = Config()
    nodes = [gpu_node(f"gpu-{i}", 8) for i in range(3)]
    planner = Planner(config)
    planner.plan([], nodes, EPOCH)
    planner.plan([], nodes[:1], EPOCH + 1)
    # Had the planner kept the two deleted Nodes, reading them back would cost nothing.
    planner.plan([], nodes, EPOCH + 2)
    assert planner.nodes_read == 2
