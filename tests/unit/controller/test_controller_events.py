"""Events about stuck gangs: once per gang and state, and again when members arrive.

CI once created the five pods of a gang so slowly that the stuck report came with 3 of
5 members: the fourth member, created after it, never got an Event, and the Event on
the others still said "3 of 5". A report is posted again when the gang's cause or its
number of members changes, not on every pass. The pure decision
(`release.actions.decide_actions`, `release.stuck_events`) is sent by the controller's
`Executor`, whose `GangEvents` posts through a synchronous pool to a recorder (no API
involved).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from builders.gangs import T0, members, node

from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.release.actions import decide_actions
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.settings.config import load_config
from gangkeeper.webhook.controller.events import GangEvents
from gangkeeper.webhook.controller.executor import Executor

CFG = load_config({"gangTimeoutSeconds": 2})
NODES = [node("n0", 8), node("n1", 8)]


class _Inline(ThreadPoolExecutor):
    """Runs what is submitted at once, in the caller's thread."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        done: Future[Any] = Future()
        done.set_result(fn(*args, **kwargs))
        return done


class _Recorder:
    def __init__(self) -> None:
        self.notes: list[tuple[str, str]] = []

    def request(self, method: str, path: str, query: Any, body: Any) -> None:
        self.notes.append((body["regarding"]["name"], body["note"]))


def _events() -> tuple[Executor, _Recorder]:
    rest = _Recorder()
    pool = _Inline(max_workers=1)
    events = GangEvents(rest, "me", lambda: pool)  # type: ignore[arg-type]
    executor = Executor(rest, CFG, events, lambda: pool, lambda *_: None,  # type: ignore[arg-type]
                        wake=lambda: None, may_write=lambda: True)
    return executor, rest


def _pass(executor: Executor, present: int, now: float) -> None:
    pods = [pod_info(p, CFG) for p in members("g", present, min_member=5, gpus=3)]
    result = plan(pods, NODES, CFG, now)
    executor.send(decide_actions(result, pods, NODES, CFG, memory=executor.memory, clock=now))


def test_a_member_arriving_after_the_report_gets_one_and_the_note_says_the_new_count() -> None:
    events, rest = _events()
    _pass(events, 3, T0 + 10)
    assert {name for name, _ in rest.notes} == {"g-0", "g-1", "g-2"}
    assert all("3 of 5 members exist" in note for _, note in rest.notes)
    rest.notes.clear()
    _pass(events, 4, T0 + 12)
    assert {name for name, _ in rest.notes} == {"g-0", "g-1", "g-2", "g-3"}
    assert all("4 of 5 members exist" in note for _, note in rest.notes)


def test_an_unchanged_stuck_gang_is_reported_once() -> None:
    events, rest = _events()
    for now in (T0 + 10, T0 + 20, T0 + 30):
        _pass(events, 3, now)
    assert sorted(name for name, _ in rest.notes) == ["g-0", "g-1", "g-2"]
