"""The watchdog's decisions: members pinned but never bound, partly bound gangs, gangs
bound but never Ready; and the release patch that records when a member was pinned."""

from __future__ import annotations

from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import pytest
from builders.gangs import T0, members, node, released

from gangkeeper.policies.cluster.observed_gangs import is_live, observe_gangs, pod_info
from gangkeeper.policies.names import RELEASED_AT_ANNOTATION
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.watchdog import (
    UNTRIED_FACTOR,
    never_ready,
    next_deadline,
    partly_bound,
    stuck,
)
from gangkeeper.policies.settings.config import Config, load_config
from gangkeeper.webhook.controller.writes import rfc3339, ungate_patch

CFG = load_config({"rebindSeconds": 30, "podsReadyTimeoutSeconds": 120})
JOB = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u1"}


def gang_of(pods: list[dict[str, Any]]) -> Any:
    (gang,) = observe_gangs([pod_info(p, CFG) for p in pods if is_live(p)], CFG)
    return gang


@pytest.mark.parametrize("hostname", [False, True], ids=["matchFields pin", "hostname pin"])
def test_a_member_pinned_and_unbound_past_rebind_seconds_is_stuck(hostname: bool) -> None:
    # A member an earlier version pinned (hostname nodeSelector) is watched alike.
    gang = gang_of(released(3, bound=2, released_at=T0, owner=JOB, hostname=hostname))
    assert stuck(gang, T0 + 29, CFG) is None
    found = stuck(gang, T0 + 31, CFG)
    assert found is not None and found.recreate
    assert [m.name for m in found.members] == ["g-2"]
    assert partly_bound(gang)


def test_a_member_the_scheduler_has_not_tried_yet_is_not_stuck_at_rebind_seconds() -> None:
    # After a burst, kube-scheduler binds at its client's rate: a member at the back
    # of its queue is not stuck, and deleting it would only lengthen the queue. With
    # no verdict for ten times rebindSeconds it counts as stuck all the same.
    gang = gang_of(released(3, bound=2, released_at=T0, owner=JOB, tried=False))
    assert stuck(gang, T0 + 31, CFG) is None
    assert next_deadline(gang, CFG) == T0 + UNTRIED_FACTOR * 30
    found = stuck(gang, T0 + UNTRIED_FACTOR * 30, CFG)
    assert found is not None and [m.name for m in found.members] == ["g-2"]
    tried = gang_of(released(3, bound=2, released_at=T0, owner=JOB))
    assert next_deadline(tried, CFG) == T0 + 30


def test_a_bare_pod_gang_is_reported_not_recreated() -> None:
    found = stuck(gang_of(released(2, bound=1, released_at=T0)), T0 + 60, CFG)
    assert found is not None and not found.recreate


def test_unpinned_or_bound_members_are_never_stuck() -> None:
    pods = released(2, bound=2, released_at=T0, owner=JOB)
    assert stuck(gang_of(pods), T0 + 600, CFG) is None
    pods = released(2, bound=0, released_at=T0, owner=JOB)
    for raw in pods:
        del raw["spec"]["affinity"]
    assert stuck(gang_of(pods), T0 + 600, CFG) is None


def test_a_gang_bound_whole_but_not_ready_after_the_timeout() -> None:
    gang = gang_of(released(2, bound=2, released_at=T0))
    assert not never_ready(gang, T0 + 100, CFG)
    assert never_ready(gang, T0 + 121, CFG)
    assert not never_ready(gang_of(released(2, bound=2, released_at=T0, ready=True)), T0 + 999, CFG)


def test_the_plan_says_why_a_released_gang_is_not_whole() -> None:
    pods = released(2, bound=1, released_at=T0, owner=JOB)
    infos = [pod_info(p, CFG) for p in pods]
    report = plan(infos, [node("n0", 8), node("n1", 8)], CFG, T0 + 45).reports[0]
    assert "1 members pinned but unbound for 45s" in report.reason
    assert "its Job is suspended and resumed" in report.reason


def test_the_release_patch_records_when_the_member_was_pinned() -> None:
    (raw,) = members("g", 1)
    info = pod_info(raw, Config())
    out = jsonpatch.apply_patch(raw, ungate_patch(info, "n7", T0))
    assert out["metadata"]["annotations"][RELEASED_AT_ANNOTATION] == rfc3339(T0)
    assert pod_info(out, Config()).released_at == T0


class _Posted:
    """A GangEvents stand-in that keeps what the watchdog posts (no API involved)."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, list[str]]] = []

    def send(self, event: Any) -> None:
        self.posts.append(
            (event.reason, [t["name"] for t in event.regarding if t["kind"] == "Pod"]))


def test_a_stuck_member_is_evented_once_while_the_stuck_set_shrinks() -> None:
    # After an API server outage members bind a few per pass: the stuck set changes
    # every pass, and each member must still get one GangMemberStuck Event, not one
    # per pass (the control-plane fault test saw 8 per pod).
    from gangkeeper.webhook.controller.watchdog import Watchdog
    from gangkeeper.webhook.kube.fake import FakeApi

    posted = _Posted()
    watchdog = Watchdog(FakeApi(), CFG, posted, lambda *_: None)  # type: ignore[arg-type]
    nodes = [node(f"n{i}", 8) for i in range(4)]
    pods = released(4, bound=0, released_at=T0)
    for bound in (0, 1, 2, 3):
        for i in range(bound):
            pods[i]["spec"]["nodeName"] = f"n{i}"
        result = plan([pod_info(p, CFG) for p in pods], nodes, CFG, T0 + 60)
        watchdog.send(watchdog.actions(result, T0 + 60), T0 + 60)
    evented = [name for reason, names in posted.posts if reason == "GangMemberStuck"
               for name in names]
    assert sorted(evented) == ["g-0", "g-1", "g-2", "g-3"]


def test_a_stuck_member_bound_after_it_was_read_is_not_deleted() -> None:
    # The scheduler binds a member just after the controller's pass read it unbound:
    # the delete of that pass must not take the member that completed the gang (a uid
    # precondition alone allowed it; the gang was left partly bound and its Job made
    # a new, unbound pod). A member still as read is deleted.
    from gangkeeper.webhook.controller.watchdog import Watchdog
    from gangkeeper.webhook.kube.fake import FakeApi

    api = FakeApi()
    # An owner that recreates deleted members and is not suspended (a Job would be).
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "name": "train", "uid": "u2"}
    pods = released(3, bound=2, released_at=T0, owner=lws)
    api.seed("/api/v1/pods", *pods)
    listed = api.request("GET", "/api/v1/pods")["items"]
    nodes = [node(f"n{i}", 8) for i in range(3)]
    watchdog = Watchdog(api, CFG, _Posted(), lambda *_: None)  # type: ignore[arg-type]
    result = plan([pod_info(p, CFG) for p in listed], nodes, CFG, T0 + 31)
    actions = watchdog.actions(result, T0 + 31)
    assert [m.name for m in actions.deletes] == ["g-2"]
    # Bound meanwhile: a new resourceVersion.
    (late,) = [p for p in listed if p["metadata"]["name"] == "g-2"]
    api.emit("/api/v1/pods", "MODIFIED", {**late, "spec": {**late["spec"], "nodeName": "n2"}})
    watchdog.send(actions, T0 + 31)
    names = [p["metadata"]["name"] for p in api.request("GET", "/api/v1/pods")["items"]]
    assert sorted(names) == ["g-0", "g-1", "g-2"], "a member bound since it was read was deleted"
    # Unchanged since read: deleted, for its Job to make it again.
    fresh = api.request("GET", "/api/v1/pods")["items"]
    (now_late,) = [p for p in fresh if p["metadata"]["name"] == "g-2"]
    api.emit("/api/v1/pods", "MODIFIED", {**now_late, "spec": {
        k: v for k, v in now_late["spec"].items() if k != "nodeName"}})
    again = api.request("GET", "/api/v1/pods")["items"]
    result = plan([pod_info(p, CFG) for p in again], nodes, CFG, T0 + 62)
    watchdog.send(watchdog.actions(result, T0 + 62), T0 + 62)
    names = [p["metadata"]["name"] for p in api.request("GET", "/api/v1/pods")["items"]]
    assert sorted(names) == ["g-0", "g-1"]
