"""The actions a pass decides besides its releases (`release.actions`), from the plan
and the controller's memory passed in as a plain value: which stuck gangs get an
Event, and what the memory says after the pass. Plain dicts in; no controller."""

from __future__ import annotations

from builders.gangs import T0, members, node
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.cluster.observed_gangs import PodInfo, pod_info
from gangkeeper.policies.release.actions import Actions, Memory, decide_actions
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.settings.config import load_config

CFG = load_config({"gangTimeoutSeconds": 2})
NODES = [node("n0", 8), node("n1", 8)]
OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "uid-job"}


def gang(present: int, *, name: str = "g") -> list[PodInfo]:
    """`present` of 5 members of 3 GPUs each: never complete, so stuck after 2 s."""
    return [pod_info(p, CFG) for p in members(name, present, min_member=5, gpus=3,
                                               owner=OWNER)]


def decide(pods: list[PodInfo], now: float, memory: Memory | None = None) -> Actions:
    return decide_actions(plan(pods, NODES, CFG, now), pods, NODES, CFG,
                          memory=memory or Memory(), clock=now)


def test_a_stuck_gang_gets_one_event_on_its_owner_and_members_naming_the_wait() -> None:
    actions = decide(gang(3), T0 + 10)
    [event] = actions.events
    assert event.reason == cat.WAIT_REASONS["incomplete"]
    assert [t["kind"] for t in event.regarding] == ["Job", "Pod", "Pod", "Pod"]
    assert event.note.startswith("gang team/g waiting 10s (timeout 2s): 3 of 5 members exist")
    assert actions.counts == ((cat.GANG_STUCK_REPORTS, (("reason", "incomplete"),), 1.0),)


def test_a_gang_not_stuck_yet_gets_nothing_and_is_not_remembered() -> None:
    actions = decide(gang(3), T0 + 1)
    assert actions.events == () and actions.counts == ()
    assert actions.memory == Memory()


def test_the_memory_passed_in_decides_whether_the_event_is_posted_again() -> None:
    first = decide(gang(3), T0 + 10)
    assert decide(gang(3), T0 + 20, first.memory).events == ()
    # A new process (empty memory) says it again; a fourth member makes a new note.
    assert len(decide(gang(3), T0 + 20).events) == 1
    [again] = decide(gang(4), T0 + 20, first.memory).events
    assert "4 of 5 members exist" in again.note


def test_a_gang_that_is_gone_is_forgotten() -> None:
    first = decide(gang(3), T0 + 10)
    assert first.memory.evented
    assert decide(gang(3, name="other"), T0 + 20, first.memory).memory.evented.keys() == {
        ("team", "other", T0)}


def test_events_regard_at_most_the_owner_and_a_hundred_members() -> None:
    pods = [pod_info(p, CFG) for p in members("big", 150, min_member=200, gpus=0,
                                               owner=OWNER)]
    [event] = decide(pods, T0 + 400).events
    assert len(event.regarding) == 101


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=6))
def test_an_event_is_posted_exactly_when_the_member_count_changes(counts: list[int]) -> None:
    memory, said = Memory(), None
    for step, present in enumerate(counts):
        actions = decide(gang(present), T0 + 10 + step, memory)
        assert bool(actions.events) == (present != said)
        memory, said = actions.memory, present
