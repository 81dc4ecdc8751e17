"""The controller's `Planner`: the same plan as `plan()` from scratch, pass after
pass, with each Node read once until it changes."""

from __future__ import annotations

from typing import Any

from bench.planning import decisions
from bench.planning_state import EPOCH, admitted_pods, bound, infos, released, trace
from gangkeeper.policies import Config
from gangkeeper.policies.cluster.shared_parts import SharedParts
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.planner import Planner
from gangkeeper.webhook.sandbox.nodes import gpu_node


def burst(gangs: int) -> tuple[Config, list[dict[str, Any]], list[dict[str, Any]], float]:
    """`bench.load`'s trace of `gangs` gangs, every pod admitted and gated: the config,
    the pods, the Nodes and a time just after the last create."""
    config = Config()
    specs, nodes = trace(gangs)
    pods = admitted_pods(specs, nodes, config)
    return config, pods, nodes, EPOCH + len(pods) * 0.01 + 5.0


def test_pass_after_pass_the_planner_decides_what_a_plan_from_scratch_decides() -> None:
    config, pods, nodes, now = burst(40)
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


def test_a_node_status_update_that_changes_no_fact_re_decides_no_gang() -> None:
    # A kubelet writes its Node's status (heartbeat times, images) every few minutes:
    # at 5,000 nodes some Node changes in almost every pass. Such a change must not
    # make the planner start over, or it is a from-scratch planner on a real cluster.
    config, pods, nodes, now = burst(40)
    planner = Planner(config)
    state = infos(pods, config, SharedParts())
    planner.plan(state, nodes, now)
    assert planner.decided > 0
    heartbeat = {**nodes[3], "metadata": {**nodes[3]["metadata"], "resourceVersion": "99"},
                 "status": {**nodes[3]["status"], "images": [{"names": ["trainer:1"]}]}}
    beat = [*nodes[:3], heartbeat, *nodes[4:]]
    ours = planner.plan(state, beat, now + 1)
    assert planner.nodes_read == 1  # read again, found the same
    assert planner.decided == 0 and planner.replayed > 0
    assert decisions(ours) == decisions(plan(state, beat, config, now + 1))
    # A change placement reads (a cordon) is still seen.
    cordoned = {**heartbeat, "spec": {**heartbeat.get("spec", {}), "unschedulable": True}}
    changed = [*nodes[:3], cordoned, *nodes[4:]]
    ours = planner.plan(state, changed, now + 2)
    assert planner.decided > 0
    assert decisions(ours) == decisions(plan(state, changed, config, now + 2))


def test_a_deleted_node_is_forgotten_with_the_pass() -> None:
    config = Config()
    nodes = [gpu_node(f"gpu-{i}", 8) for i in range(3)]
    planner = Planner(config)
    planner.plan([], nodes, EPOCH)
    planner.plan([], nodes[:1], EPOCH + 1)
    # Had the planner kept the two deleted Nodes, reading them back would cost nothing.
    planner.plan([], nodes, EPOCH + 2)
    assert planner.nodes_read == 2


def test_a_pass_with_nothing_changed_is_the_last_plan_with_the_ages_moved_on() -> None:
    config = Config()
    specs, nodes = trace(40)
    pods = admitted_pods(specs, nodes, config)
    now = EPOCH + len(pods) * 0.01 + 5.0
    shared = SharedParts()
    planner = Planner(config)
    burst = planner.plan(infos(pods, config, shared), nodes, now, version=1)
    settled_pods = infos(bound(released(pods, burst, now), nodes), config, shared)
    first = planner.plan(settled_pods, nodes, now + 1, version=2)
    assert not planner.reused and first.quiet
    waiting = [r for r in first.reports if r.state == "waiting"]
    assert waiting, "the trace leaves gangs waiting"
    again = planner.plan(settled_pods, nodes, now + 7, version=2)
    assert planner.reused and planner.nodes_read == 0
    assert decisions(again) == decisions(plan(settled_pods, nodes, config, now + 7))
    assert [r.age_seconds - 6 for r in again.reports] == [r.age_seconds for r in first.reports]


def test_a_plan_with_work_to_do_or_another_version_is_planned_again() -> None:
    config = Config()
    specs, nodes = trace(20)
    raw = admitted_pods(specs, nodes, config)
    shared = SharedParts()
    pods = infos(raw, config, shared)
    now = EPOCH + len(pods) * 0.01 + 5.0
    planner = Planner(config)
    burst = planner.plan(pods, nodes, now, version=1)
    assert burst.releases and not burst.quiet
    planner.plan(pods, nodes, now + 1, version=1)
    assert not planner.reused  # the releases were not seen done: decide again
    quiet = infos(bound(released(raw, burst, now), nodes), config, shared)
    planner.plan(quiet, nodes, now + 2, version=2)
    planner.plan(quiet, nodes, now + 3, version=3)
    assert not planner.reused
    planner.plan(quiet, nodes, now + 4, version=3)
    assert planner.reused
    planner.plan(quiet, nodes, now + 5, version=3, leaving=frozenset({quiet[0].uid}))
    assert not planner.reused  # another input changed


def test_a_waiting_gang_turning_stuck_ends_the_plan_it_was_waiting_in() -> None:
    config = Config(gang_timeout_seconds=30)
    nodes = [gpu_node("gpu-0", 8)]
    specs, _ = trace(1)
    pods = infos(admitted_pods(specs, nodes, config), config, SharedParts())
    planner = Planner(config)
    result = planner.plan(pods, [], EPOCH, version=1)  # no nodes: every gang waits
    arrived = min(r.arrived for r in result.reports)
    assert result.quiet and result.valid_until == arrived + 30
    before = planner.plan(pods, [], arrived + 29, version=1)
    assert planner.reused and not any(r.stuck for r in before.reports)
    after = planner.plan(pods, [], arrived + 30, version=1)
    assert not planner.reused and all(r.stuck for r in after.reports)
