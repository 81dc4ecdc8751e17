"""Fencing: a controller that is no longer (surely) the leader writes nothing, and a
patch computed from a stale view of a pod fails instead of landing.

The controller runs one pass against the in-memory `FakeApi` (its client swapped
for the fake; no thread started): a Lease held by someone else, a leader paused past
its renewal deadline, and a pod changed after the cache read it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from builders.gangs import members, node
from kubernetes.client import ApiClient

from gangkeeper.policies.names import GATE, LEASE_NAME
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.controller.controller import GangController
from gangkeeper.webhook.controller.fencing import guarded
from gangkeeper.webhook.kube.api import ApiError
from gangkeeper.webhook.kube.fake import FakeApi

PODS = "/api/v1/pods"
LEASES = "/apis/coordination.k8s.io/v1/leases"
NAMESPACE = "gangkeeper-system"


def lease(holder: str) -> dict[str, Any]:
    return {"metadata": {"name": LEASE_NAME, "namespace": NAMESPACE},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}}


@pytest.fixture
def setup() -> Iterator[tuple[GangController, FakeApi]]:
    api = FakeApi()
    controller = GangController(ApiClient(), Config(), namespace=NAMESPACE, identity="me",
                                api=api)
    api.seed(PODS, *members("train", 2))
    for raw in api.objects[PODS].values():
        controller.pods.put(raw)
    controller.nodes.put(node("n1", 8))
    for informer in controller._watched.values():
        informer.synced.set()
    # As if elected a moment ago.
    controller.elector._leader.set()
    controller.elector._renewed_at = time.monotonic()
    controller._pool = ThreadPoolExecutor(4)
    yield controller, api
    controller._pool.shutdown()


def patches(api: FakeApi) -> list[str]:
    return [path for method, path, _ in api.calls if method == "PATCH"]


def gated(api: FakeApi) -> int:
    return sum(
        1 for p in api.objects[PODS].values()
        if any(g["name"] == GATE for g in p["spec"].get("schedulingGates") or [])
    )


def test_the_leader_releases_when_the_lease_is_still_its_own(setup: Any) -> None:
    controller, api = setup
    api.seed(LEASES, lease("me"))
    controller.reconcile_once()
    assert gated(api) == 0
    assert len(patches(api)) == 2


def test_a_leader_whose_lease_another_replica_took_writes_nothing_and_steps_down(
    setup: Any,
) -> None:
    controller, api = setup
    api.seed(LEASES, lease("other"))
    controller.reconcile_once()
    assert patches(api) == []
    assert gated(api) == 2
    assert not controller.is_leader
    assert controller.metric_samples()[("gangkeeper_controller_fenced_writes_total", ())] == 1


def test_a_leader_paused_past_its_renewal_deadline_is_no_leader_when_it_wakes(
    setup: Any,
) -> None:
    controller, api = setup
    api.seed(LEASES, lease("me"))  # nobody took over (yet): still not safe to write
    controller.elector._renewed_at = time.monotonic() - 10.5  # renew_deadline is 10 s
    assert not controller.is_leader
    controller.reconcile_once()
    assert patches(api) == []
    assert gated(api) == 2


def test_a_write_already_in_a_burst_is_dropped_once_the_deadline_passed(setup: Any) -> None:
    controller, api = setup
    controller.elector._renewed_at = time.monotonic() - 10.5
    [pod, _] = controller.pods.items()
    assert controller.releaser.lift(pod) == "fenced"
    assert patches(api) == []


def test_a_pod_changed_in_a_way_planning_reads_is_not_patched_from_the_stale_view(
    setup: Any,
) -> None:
    controller, api = setup
    api.seed(LEASES, lease("me"))
    [stale, _] = sorted(controller.pods.items(), key=lambda p: p.name)
    current = api.objects[PODS][f"{stale.namespace}/{stale.name}"]
    current["metadata"]["resourceVersion"] = "999"
    current["spec"]["nodeSelector"] = {"pool": "elsewhere"}  # what the plan placed by
    assert controller.releaser.lift(stale) == "conflict"
    assert gated(api) == 2
    errors = controller.metric_samples()
    assert errors[("gangkeeper_gang_ungate_errors_total", (("cause", "conflict"),))] == 1


def test_a_pod_changed_only_where_no_plan_looks_is_patched_on_its_new_version(
    setup: Any,
) -> None:
    controller, api = setup
    api.seed(LEASES, lease("me"))
    [stale, _] = sorted(controller.pods.items(), key=lambda p: p.name)
    current = api.objects[PODS][f"{stale.namespace}/{stale.name}"]
    current["metadata"]["resourceVersion"] = "999"  # the scheduler's SchedulingGated
    current["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    assert controller.releaser.lift(stale) == "ungated"
    assert gated(api) == 1
    [first, retried] = [c for c in api.calls if c[0] == "PATCH"]
    assert first == retried, "one retry, on the version read again"


def test_the_guard_is_a_test_of_the_version_read_before_the_patch() -> None:
    patch = [{"op": "remove", "path": "/spec/schedulingGates"}]
    assert guarded(patch, "41") == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "41"}, *patch
    ]
    assert guarded(patch, "") == patch


def test_a_guarded_patch_of_an_older_version_is_refused_by_the_api() -> None:
    api = FakeApi()
    api.seed(PODS, *members("train", 1))
    [stored] = api.objects[PODS].values()
    path = "/api/v1/namespaces/team/pods/" + stored["metadata"]["name"]
    patch = [{"op": "replace", "path": "/spec/schedulingGates", "value": []}]
    with pytest.raises(ApiError) as err:
        api.request("PATCH", path, body=guarded(patch, "0"))
    assert err.value.status == 422


def test_a_member_released_into_a_released_gang_is_counted_and_gets_one_normal_event(
    setup: Any,
) -> None:
    controller, api = setup
    api.seed(LEASES, lease("me"))
    [first, _] = sorted(controller.pods.items(), key=lambda p: p.name)
    running = api.objects[PODS][f"{first.namespace}/{first.name}"]
    running["spec"]["schedulingGates"] = []
    running["spec"]["nodeName"] = "n1"
    running["metadata"]["resourceVersion"] = "50"
    controller.pods.put(running)
    controller.reconcile_once()
    controller._pool.shutdown(wait=True)
    posted = [body for method, path, body in api.calls
              if method == "POST" and path.endswith("/events")]
    events = list(api.objects["/apis/events.k8s.io/v1/events"].values())
    assert gated(api) == 0
    assert [(e["reason"], e["type"], e["regarding"]["name"]) for e in events] == [
        ("GangMemberRejoined", "Normal", "train-1")
    ], posted
    assert controller.metric_samples()[("gangkeeper_gang_rejoined_pods_total", ())] == 1
