"""What the watchdog decides about released gangs (`release.watchdog_actions`), from
the plan and its memory passed in as a plain value: requeues bounded by
`rebindRetries`, one stuck Event per member, one not-Ready Event per gang instance,
and what follows a suspension from its outcome. Plain dicts in; no API."""

from __future__ import annotations

from typing import Any

from builders.gangs import JOB, LWS, T0, node, pod, released
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import Plan
from gangkeeper.policies.release.watchdog_actions import (
    MAX_TRACKED,
    RESUME_AFTER_SECONDS,
    WatchdogMemory,
    after_suspend,
    to_resume,
    watchdog_actions,
)
from gangkeeper.policies.settings.config import Config, load_config

LATER = T0 + 61


def config(**keys: Any) -> Config:
    return load_config({"rebindSeconds": 30, "podsReadyTimeoutSeconds": 120, **keys})


def planned(pods: list[dict[str, Any]], cfg: Config, now: float = LATER) -> Plan:
    """Released gang g on n0..n2 (4 GPUs each); a pod of no gang took n1 from g-1."""
    fleet = [node(f"n{i}", 4) for i in range(3)]
    thief = pod("thief", 4, node_name="n1", phase="Running")
    return plan([pod_info(p, cfg) for p in [*pods, thief]], fleet, cfg, now)


def test_a_recreating_owners_stuck_member_is_deleted_counted_and_announced() -> None:
    cfg = config()
    actions = watchdog_actions(planned(released(2, bound=1, owner=LWS), cfg), LATER, cfg,
                               WatchdogMemory())
    assert [p.name for p in actions.deletes] == ["g-1"]
    assert [e.reason for e in actions.events] == [cat.GANG_MEMBERS_RECREATED]
    assert "(retry 1 of 3)" in actions.events[0].note
    assert (cat.GANG_REQUEUES, (("cause", "rebind"), ("how", "delete")), 1.0) in actions.counts
    assert actions.memory.retries == {("team", LWS["uid"]): 1}


def test_the_retries_in_memory_bound_the_requeues() -> None:
    cfg = config(rebindRetries=1)
    memory = WatchdogMemory(retries={("team", LWS["uid"]): 1})
    result = planned(released(2, bound=1, owner=LWS), cfg)
    actions = watchdog_actions(result, LATER, cfg, memory)
    assert actions.deletes == ()
    [event] = actions.events
    assert event.reason == cat.GANG_MEMBER_STUCK and "retries spent" in event.note
    # Told once: the same member is not told again on the next pass.
    assert watchdog_actions(result, LATER + 1, cfg, actions.memory).events == ()


def test_a_job_is_left_to_the_suspension_and_its_outcome_decides_the_rest() -> None:
    cfg = config()
    actions = watchdog_actions(planned(released(2, bound=1, owner=JOB), cfg), LATER, cfg,
                               WatchdogMemory())
    [requeue] = actions.suspends
    assert actions.deletes == () and actions.events == ()
    events, counts, memory = after_suspend(actions.memory, requeue, "suspended", 2, cfg)
    assert [e.reason for e in events] == [cat.GANG_REQUEUED]
    assert "Job train suspended" in events[0].note and "(retry 2 of 3)" in events[0].note
    assert memory.retries == {("team", JOB["uid"]): 2}
    events, counts, memory = after_suspend(actions.memory, requeue, "spent", 3, cfg)
    assert [e.reason for e in events] == [cat.GANG_MEMBER_STUCK] and counts == []
    assert after_suspend(actions.memory, requeue, "error", 0, cfg) == ([], [], actions.memory)


def test_owners_resumed_or_still_suspended_this_pass_are_not_requeued_again() -> None:
    cfg = config()
    pods = released(2, bound=1, owner=JOB)
    result = planned(pods, cfg)
    infos = [pod_info(p, cfg) for p in pods]
    # Its pods are still there: its requeue is under way.
    busy = watchdog_actions(result, LATER, cfg, WatchdogMemory(), pods=infos,
                            suspended=[(JOB["uid"], LATER - 1)])
    assert busy.suspends == () and busy.resume == frozenset()
    # Its pods are gone from the cache (the plan may still show them): resumed, not requeued.
    resumed = watchdog_actions(result, LATER, cfg, WatchdogMemory(), pods=[],
                               suspended=[(JOB["uid"], LATER - 1)])
    assert resumed.suspends == () and resumed.resume == {JOB["uid"]}


def test_a_gang_never_ready_is_told_once_per_instance_and_counted_in_the_gauge() -> None:
    cfg = config()
    fleet = [node(f"n{i}", 4) for i in range(2)]
    result = plan([pod_info(p, cfg) for p in released(2, bound=2)], fleet, cfg, T0 + 121)
    first = watchdog_actions(result, T0 + 121, cfg, WatchdogMemory())
    assert [e.reason for e in first.events] == [cat.GANG_NOT_READY]
    assert first.gauges[cat.GANGS_NOT_READY] == 1.0
    assert watchdog_actions(result, T0 + 122, cfg, first.memory).events == ()


def test_the_memory_of_gangs_gone_is_dropped_and_the_retries_stay_bounded() -> None:
    cfg = config()
    told = WatchdogMemory(reported=frozenset({("team", "gone", "u")}),
                          not_ready=frozenset({("team", "gone", T0)}))
    after = watchdog_actions(planned([], cfg), LATER, cfg, told).memory
    assert after.reported == frozenset() and after.not_ready == frozenset()
    full = WatchdogMemory(retries={("team", f"u{i}"): 1 for i in range(MAX_TRACKED)})
    actions = watchdog_actions(planned(released(2, bound=1, owner=LWS), cfg), LATER, cfg, full)
    assert len(actions.memory.retries) == MAX_TRACKED
    assert ("team", "u0") not in actions.memory.retries  # the least recent forgotten
    assert list(actions.memory.retries)[-1] == ("team", LWS["uid"])


def test_an_owner_is_resumed_once_its_pods_are_gone_or_after_a_while_whatever_is_left() -> None:
    cfg = config()
    pods = [pod_info(p, cfg) for p in released(2, bound=1, owner=JOB)]
    held = [(JOB["uid"], T0), (LWS["uid"], T0)]  # LWS's pods are all gone
    assert to_resume(held, pods, T0 + 1) == {LWS["uid"]}
    assert to_resume(held, pods, T0 + RESUME_AFTER_SECONDS) == {JOB["uid"], LWS["uid"]}
    assert to_resume([], pods, T0) == frozenset()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(min_value=0.5, max_value=120.0), min_size=1, max_size=8),
       st.integers(min_value=0, max_value=3))
def test_a_gang_is_requeued_at_most_rebind_retries_times_and_each_member_told_once(
    steps: list[float], retries: int,
) -> None:
    """Whatever the passes' timing, a gang whose member stays stuck (its owner never
    recreates it) is requeued `rebindRetries` times, then told once per member."""
    cfg = config(rebindRetries=retries)
    pods = released(2, bound=1, owner=LWS)
    memory, now, deleted, told = WatchdogMemory(), LATER, 0, []
    for step in steps:
        now += step
        actions = watchdog_actions(planned(pods, cfg, now), now, cfg, memory)
        memory = actions.memory
        deleted += bool(actions.deletes)
        told += [t["name"] for e in actions.events if e.reason == cat.GANG_MEMBER_STUCK
                 for t in e.regarding if t["kind"] == "Pod"]
    assert deleted == min(retries, len(steps))
    assert told == (["g-1"] if len(steps) > retries else [])
