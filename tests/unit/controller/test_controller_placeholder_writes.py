"""The placeholder writes against an in-memory API: create once, adopt, delete, Events."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from builders.gangs import members

from gangkeeper.policies.cluster.observed_gangs import PodInfo, pod_info
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import Plan
from gangkeeper.policies.settings.config import load_config
from gangkeeper.webhook.controller.placeholders import PlaceholderWriter
from gangkeeper.webhook.kube.api import ApiError, Call
from gangkeeper.webhook.kube.fake import FakeApi

CONFIG = load_config({
    "pools": [{"name": "a", "maxCount": 8, "labels": {"pool": "a"},
               "allocatable": {"nvidia.com/gpu": 8}}],
    "provisioningTimeoutSeconds": 600,
})
PODS = "/api/v1/pods"
#: The in-memory API stamps creationTimestamp with the wall clock: so does the test.
T0 = time.time() - 100
OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "llama", "uid": "job-uid"}


class QuotaApi(FakeApi):
    """Refuses pod creation as ResourceQuota admission does."""

    def send(self, call: Call) -> dict[str, Any]:
        if call.method == "POST" and call.path.endswith("/pods"):
            message = 'pods "x" is forbidden: exceeded quota: gpus'
            raise ApiError(403, "Forbidden", json.dumps({"message": message}))
        return super().send(call)


@pytest.fixture
def pool() -> Any:
    with ThreadPoolExecutor(4) as executor:
        yield executor


def writer(api: FakeApi, pool: ThreadPoolExecutor) -> tuple[PlaceholderWriter, list[Any]]:
    events: list[Any] = []
    out = PlaceholderWriter(
        api, CONFIG, pool=lambda: pool,
        emit=lambda event: events.extend((r, event.reason, event.note)
                                         for r in event.regarding),
        count=lambda *_: None, write_query=(),
    )
    return out, events


def state(api: FakeApi) -> list[PodInfo]:
    return [pod_info(p, CONFIG) for p in api.objects[PODS].values()]


def one_pass(api: FakeApi, now: float, w: PlaceholderWriter) -> Plan:
    result = plan(state(api), [], CONFIG, now, w.backoff)
    w.send(w.actions(result, state(api)))
    return result


def gang() -> list[dict[str, Any]]:
    return members("llama", 4, gpus=8, selector={"pool": "a"}, owner=OWNER, created=T0)


def placeholders(api: FakeApi) -> list[dict[str, Any]]:
    return [p for p in api.objects[PODS].values()
            if "gangkeeper.io/placeholder-for" in p["metadata"].get("labels", {})]


def test_placeholders_are_created_once_from_the_members_spec_and_adopted_after(
    pool: ThreadPoolExecutor,
) -> None:
    api = FakeApi()
    api.seed(PODS, *gang())
    w, _ = writer(api, pool)
    one_pass(api, T0 + 60, w)
    made = placeholders(api)
    assert sorted(p["metadata"]["name"] for p in made) == [f"llama-{i}-gkp" for i in range(4)]
    assert made[0]["metadata"]["ownerReferences"][0]["uid"] == "job-uid"
    # A new leader (a fresh writer) finds them and creates nothing more.
    w2, _ = writer(api, pool)
    one_pass(api, T0 + 70, w2)
    assert len(placeholders(api)) == 4
    assert not [c for c in api.calls if c[0] == "POST" and c[1].endswith("/pods")][4:]


def test_a_placeholder_gone_without_us_is_reported_and_asked_for_again(
    pool: ThreadPoolExecutor,
) -> None:
    api = FakeApi()
    api.seed(PODS, *gang())
    w, events = writer(api, pool)
    one_pass(api, T0 + 60, w)
    one_pass(api, T0 + 61, w)  # the pass that sees them (the watch, in a controller)
    victim = placeholders(api)[0]
    api.forget(PODS, victim)  # preempted: the scheduler deleted it
    one_pass(api, T0 + 61, w)
    assert [e[1] for e in events if e[0]["kind"] == "Job"] == ["GangPlaceholderPreempted"]
    assert victim["metadata"]["name"] in events[0][2]
    assert len(placeholders(api)) == 4  # asked again


def test_a_timeout_deletes_them_says_why_and_backs_off(pool: ThreadPoolExecutor) -> None:
    api = FakeApi()
    api.seed(PODS, *gang())
    w, events = writer(api, pool)
    one_pass(api, T0 + 60, w)
    # Created at the fake's clock; the timeout counts from their creationTimestamp.
    created = min(pod_info(p, CONFIG).created for p in placeholders(api))
    one_pass(api, created + 600, w)
    assert placeholders(api) == []
    [(_, reason, note)] = [e for e in events if e[0]["kind"] == "Job"]
    assert reason == "GangProvisioningTimedOut"
    assert "0 of 4 members' nodes came in 600 s" in note
    assert next(iter(w.backoff.values()))[0] == 1
    one_pass(api, created + 601, w)
    assert placeholders(api) == []  # waiting out the backoff
    assert not [e for e in events if e[1] == "GangPlaceholderPreempted"]


def test_a_refusal_by_quota_is_one_event_per_gang_naming_the_quota(
    pool: ThreadPoolExecutor,
) -> None:
    api = QuotaApi()
    api.seed(PODS, *gang())
    w, events = writer(api, pool)
    one_pass(api, T0 + 60, w)
    one_pass(api, T0 + 61, w)
    refused = [e for e in events if e[0]["kind"] == "Job"]
    assert [e[1] for e in refused] == ["GangPlaceholdersRefused"]
    assert "exceeded quota: gpus" in refused[0][2]


def test_orphans_are_deleted_and_a_released_gangs_go_first(pool: ThreadPoolExecutor) -> None:
    api = FakeApi()
    api.seed(PODS, *gang())
    w, _ = writer(api, pool)
    one_pass(api, T0 + 60, w)
    for member in gang():
        api.forget(PODS, member)  # the gang went away
    one_pass(api, T0 + 61, w)
    assert placeholders(api) == []
