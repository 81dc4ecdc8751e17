"""The controller's passes with nothing changed: the stores' generations tell the
planner so, the last plan is re-used, a change it can see plans afresh, and the next
pass comes at the last plan's deadline (a gang turning stuck), not only at resync."""

from __future__ import annotations

import time

from builders.gangs import members, node
from kubernetes.client import ApiClient

from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.controller.controller import GangController

CFG = Config(gang_timeout_seconds=300)


def _synced(controller: GangController) -> GangController:
    # Built, never started: no thread runs, no request is made, nobody leads.
    for informer in controller._watched.values():
        informer.synced.set()
    return controller


def test_a_pass_with_nothing_changed_re_uses_the_plan_and_a_change_plans_again() -> None:
    controller = _synced(GangController(ApiClient(), CFG, namespace="gk", identity="t",
                                        resync_seconds=10.0))
    controller.nodes.put(node("n1", 8))
    now = time.time()
    # Two members of 8 GPUs on one 8-GPU node: the gang waits.
    gang = members("big", 2, gpus=8, created=now - 100)
    for raw in gang:
        controller.pods.put(raw)
    first = controller.reconcile_once()
    assert [r.state for r in first.reports] == ["waiting"]
    assert not controller._planner.reused
    controller.reconcile_once()
    assert controller._planner.reused
    # The gang turns stuck at creation + 300 s: the next pass comes then, not at resync.
    assert 190 < first.valid_until - time.time() <= 200
    assert controller._next_wait() == 10.0
    controller.nodes.put(node("n2", 8))  # room: a change the plan can see
    again = controller.reconcile_once()
    assert not controller._planner.reused
    assert [r.state for r in again.reports] == ["releasing"]


def test_the_next_pass_comes_at_the_deadline_when_it_is_before_the_resync() -> None:
    controller = _synced(GangController(ApiClient(), CFG, namespace="gk", identity="t",
                                        resync_seconds=600.0))
    controller.nodes.put(node("n1", 8))
    for raw in members("big", 2, gpus=8, created=time.time() - 295):
        controller.pods.put(raw)
    result = controller.reconcile_once()
    assert not result.reports[0].stuck
    assert 0 < controller._next_wait() <= 5.5
