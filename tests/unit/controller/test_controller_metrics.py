"""The controller's numbers for /metrics, before it has talked to any API server."""

from __future__ import annotations

from builders.gangs import T0, members, node
from kubernetes.client import ApiClient, Configuration

from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.controller import GangController, plan


def idle_controller() -> GangController:
    # Never started: no request is made; the address is never contacted.
    configuration = Configuration()
    configuration.host = "https://127.0.0.1:9"
    return GangController(ApiClient(configuration), Config(), namespace="gk", identity="t")


def test_labelled_samples_start_at_zero_and_say_not_leader() -> None:
    samples = idle_controller().metric_samples()
    assert samples[("gangkeeper_controller_leader", ())] == 0.0
    assert samples[("gangkeeper_controller_synced", ())] == 0.0
    for state in ("waiting", "releasing", "released"):
        assert samples[("gangkeeper_gangs", (("state", state),))] == 0.0
    for reason in ("incomplete", "no-fit", "held", "invalid"):
        assert samples[("gangkeeper_gangs_waiting", (("reason", reason),))] == 0.0


def test_flat_metrics_count_each_waiting_gang_once() -> None:
    controller = idle_controller()
    bound = members("b", 2, gates=(), node_name="n")  # released: all bound
    pods = [pod_info(p, Config()) for p in members("a", 8)[:3] + bound]
    controller._last_plan = plan(pods, [node("n", 8)], Config(), T0 + 1000)  # one pass
    flat = controller.metrics()
    assert flat["gangkeeper_gangs_waiting"] == 1.0
    assert flat["gangkeeper_gangs_released"] == 1.0
    assert flat["gangkeeper_gangs_stuck"] == 1.0
    samples = controller.metric_samples()
    assert samples[("gangkeeper_gangs_waiting", (("reason", "incomplete"),))] == 1.0
    assert all(isinstance(k, str) and "{" not in k for k in flat)


def test_a_pass_that_differs_from_a_fresh_plan_is_counted_and_the_fresh_plan_wins() -> None:
    controller = idle_controller()
    pods = [pod_info(p, Config()) for p in members("a", 2)]
    nodes = [node("n", 8)]
    inputs = {"requests": None, "leaving": frozenset(), "budgets": []}
    fresh = plan(pods, nodes, Config(), T0)
    assert fresh.releases  # the gang of 2 fits the 8 GPUs
    kept = controller._cross_check(fresh, pods, nodes, T0, inputs)
    assert kept is fresh  # the same decisions: the pass stands, nothing counted
    stale = plan(pods, [node("n", 0)], Config(), T0)  # as if a Node's facts were stale
    controller._planner.plan(pods, nodes, T0)
    assert controller._cross_check(stale, pods, nodes, T0, inputs).releases == fresh.releases
    samples = controller.metric_samples()
    assert samples[("gangkeeper_plan_divergence_total", ())] == 1.0
    # Nothing the planner kept is used again: its next pass decides every gang.
    controller._planner.plan(pods, nodes, T0)
    assert (controller._planner.decided, controller._planner.replayed) == (1, 0)
