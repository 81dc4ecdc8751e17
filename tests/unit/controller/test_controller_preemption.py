"""The controller's side of preemption (`webhook/controller/preemption.py`): victim
gangs requeued through their owners, pods of no gang evicted through the Eviction API
(a 429 is a refusal, said on the preemptor), Events on both sides, and victims
remembered as leaving so the next pass neither preempts them again nor more."""

from __future__ import annotations

from typing import Any

from builders.gangs import T0, node
from builders.preemption import planned, running_gang, running_pod, waiting_gang

from gangkeeper.policies.errors import TooManyRequests
from gangkeeper.policies.release.preemption_actions import LEAVING_SECONDS
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.controller.preemption import Preemptions
from gangkeeper.webhook.controller.watchdog import Watchdog


class _Posted:
    def __init__(self) -> None:
        self.posts: list[tuple[str, list[str], str]] = []

    def send(self, event: Any) -> None:
        self.posts.append(
            (event.reason, [t["name"] for t in event.regarding if t["kind"] == "Pod"],
             event.note))


class _Rest:
    """Answers the executor's requests: Jobs to suspend, evictions (refused by name)."""

    def __init__(self, refuse: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.refuse = refuse
        self.requests: list[tuple[str, str]] = []

    def get(self, path: str, query: object = ()) -> dict[str, Any]:
        name = path.rsplit("/", 1)[1]
        return {"metadata": {"name": name, "uid": f"{name}-uid", "annotations": {}},
                "spec": {"suspend": False}}

    def request(self, method: str, path: str, query: object = (), **_: object) -> dict[str, Any]:
        self.requests.append((method, path))
        if path.endswith("/eviction") and path.split("/")[-2] in self.refuse:
            raise TooManyRequests(429, "TooManyRequests", "")
        return {}


def _executor(rest: _Rest) -> tuple[Preemptions, _Posted, list[tuple[str, Any, float]]]:
    posted, counted = _Posted(), []
    watchdog = Watchdog(rest, Config(), posted, lambda *a: None)  # type: ignore[arg-type]
    preemptions = Preemptions(
        rest, posted, watchdog,  # type: ignore[arg-type]
        lambda family, labels=(), value=1.0: counted.append((family.name, labels, value)),
    )
    return preemptions, posted, counted


def test_victim_gangs_are_suspended_and_remembered_as_leaving() -> None:
    nodes = [node(f"n{i}", 8) for i in range(2)]
    low = [*running_gang("low0", ["n0"], 8, 10), *running_gang("low1", ["n1"], 8, 10,
                                                                started=T0 + 5)]
    result = planned([*low, *waiting_gang("high", 1, 8, 1000)], nodes)
    rest = _Rest()
    preemptions, posted, counted = _executor(rest)
    preemptions.send(result.preemptions, T0)
    assert rest.requests == [("PATCH", "/apis/batch/v1/namespaces/team/jobs/low1")]
    reasons = [reason for reason, _, _ in posted.posts]
    assert reasons == ["GangPreempting", "PreemptedByGang"]
    assert "preempted by gang team/high (priority 1000)" in posted.posts[1][2]
    assert ("gangkeeper_preemptions_total", (("outcome", "started"),), 1.0) in counted
    assert ("gangkeeper_preempted_gpus_total", (), 8) in counted
    infos = [p for g in result.gangs for p in g.members]
    assert preemptions.leaving(infos, T0) == {low[1]["metadata"]["uid"]}
    assert preemptions.leaving([], T0) == frozenset()  # pods gone: forgotten


def test_leaving_victims_are_handed_to_the_next_pass_until_gone_or_stale() -> None:
    nodes = [node("n0", 8)]
    low = running_gang("low", ["n0"], 8, 10)
    pods = [*low, *waiting_gang("high", 1, 8, 1000)]
    result = planned(pods, nodes)
    preemptions, _, _ = _executor(_Rest())
    preemptions.send(result.preemptions, T0)
    infos = [p for g in result.gangs for p in g.members]
    leaving = preemptions.leaving(infos, T0 + 1)
    assert leaving == {low[0]["metadata"]["uid"]}
    # The next pass counts them as gone: it waits for them, preempting nothing more.
    again = planned(pods, nodes, leaving=leaving)
    assert again.preemptions == ()
    assert preemptions.leaving(infos, T0 + LEAVING_SECONDS + 1) == frozenset()


def test_an_eviction_a_budget_refuses_is_said_on_the_preemptor() -> None:
    nodes = [node("n0", 8)]
    pods = [running_pod("guarded", "n0", 8, 5), *waiting_gang("high", 1, 8, 1000)]
    result = planned(pods, nodes)  # the controller's budgets were stale: it tries
    rest = _Rest(refuse={"guarded"})
    preemptions, posted, counted = _executor(rest)
    preemptions.send(result.preemptions, T0)
    assert rest.requests == [("POST", "/api/v1/namespaces/team/pods/guarded/eviction")]
    assert [reason for reason, _, _ in posted.posts] == ["GangPreempting",
                                                          "GangPreemptionBlocked"]
    assert "refused pod team/guarded" in posted.posts[1][2]
    assert ("gangkeeper_preemptions_total", (("outcome", "refused"),), 1.0) in counted
    assert preemptions.leaving([p for g in result.gangs for p in g.members], T0) == frozenset()
