"""A running gang that loses a member (preempted by kube-scheduler, evicted, deleted):
its owner's replacement is released when it has room, and otherwise stays gated —
released, it could only sit Pending — until `rebindSeconds`, when the whole gang is
requeued rather than left running short (`plan._short`)."""

from __future__ import annotations

from builders.gangs import JOB, T0, members, node, pod, released

from gangkeeper.policies.cluster.observed_gangs import is_live, pod_info
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import Plan
from gangkeeper.policies.settings.config import Config

CFG = Config(rebind_seconds=60)


def _short_gang(*, hog: bool) -> list[dict[str, object]]:
    """g-0 bound on n0 since T0; g-1 was preempted and its replacement created at T0+100
    (gated); with `hog`, a pod of no gang took n1 where g-1 ran."""
    (first, _) = released(2, bound=2, released_at=T0, owner=JOB)
    (replacement,) = members("g", 1, gpus=4, owner=JOB, created=T0 + 100, min_member=2)
    replacement["metadata"]["name"] = replacement["metadata"]["uid"] = "g-1b"
    pods = [first, replacement]
    if hog:
        pods.append(pod("hog", 4, gates=(), node_name="n1", phase="Running"))
    return pods


def _plan(pods: list[dict[str, object]], now: float) -> Plan:
    return plan([pod_info(p, CFG) for p in pods if is_live(p)],
                [node("n0", 4), node("n1", 4)], CFG, now)


def test_a_replacement_with_room_is_released_at_once_pinned() -> None:
    result = _plan(_short_gang(hog=False), T0 + 101)
    (release,) = result.releases
    assert [p.name for p in release.pods] == ["g-1b"] and release.pins


def test_a_replacement_without_room_waits_gated_then_the_gang_is_requeued_whole() -> None:
    pods = _short_gang(hog=True)
    early = _plan(pods, T0 + 130)
    assert early.releases == () and early.requeues == ()
    assert "1 replacement members have no room beside the 1 bound" in early.reports[0].reason
    late = _plan(pods, T0 + 161)
    assert late.releases == ()
    (requeue,) = late.requeues
    assert (requeue.how, requeue.whole, requeue.cause) == ("suspend", True, "rebind")
    assert [m.name for m in requeue.about] == ["g-1b"]
    assert "requeued whole" in late.reports[0].reason


def test_a_waiting_replacement_makes_the_plan_good_for_its_instant_only() -> None:
    # Its reason counts the seconds waited: a planner re-using the plan a second later
    # would show a stale count, so the plan says it holds only for now.
    from gangkeeper.policies.release.planner import Planner

    pods = [pod_info(p, CFG) for p in _short_gang(hog=True) if is_live(p)]
    nodes = [node("n0", 4), node("n1", 4)]
    planner = Planner(CFG)
    first = planner.plan(pods, nodes, T0 + 130, version=1)
    assert first.quiet and first.valid_until == T0 + 130
    second = planner.plan(pods, nodes, T0 + 131, version=1)
    assert not planner.reused
    assert "(31s;" in second.reports[0].reason
