"""The server's watch-fed cluster view: list, watch, re-list on 410, reconnect, owner misses.

The view reads the API through the process's informers; here they run over the
in-memory `FakeApi`, so the caching logic (what is counted, forgotten, fetched and when
the view says it is synced) is tested without timing games. The real API server is
exercised by the end-to-end tests (tests/e2e), which run `gangkeeper serve --kubeconfig`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from builders.polling import wait_for

from gangkeeper.policies.errors import OwnerNotCached
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.kube.fake import FakeApi
from gangkeeper.webhook.kube.informer import Informers
from gangkeeper.webhook.kube.resources import NODES, PODS, Resource
from gangkeeper.webhook.server.cluster_view import WatchClusterView

JOBS = Resource("batch", "v1", "jobs", "Job")
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")


def node(name: str, gpus: int = 8) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}}}


def pod(name: str, node_name: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"nodeName": node_name, "containers": [
                {"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": phase}}


def job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "ns", "managedFields": [{"big": "x"}]},
            "spec": {"parallelism": 2}}


def gets(api: FakeApi) -> list[tuple[str, str]]:
    return [("get", path) for method, path, _ in api.calls if method == "GET"]


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


@pytest.fixture
def start(api: FakeApi) -> Iterator[Callable[..., WatchClusterView]]:
    started: list[Informers] = []

    def make(owners: Sequence[Resource] = (JOBS,),
             on_synced: Callable[[str, bool], None] | None = None) -> WatchClusterView:
        informers = Informers(api)
        view = WatchClusterView(informers, Config(), owners=owners, on_synced=on_synced)
        started.append(informers)
        informers.start()
        assert view.wait_synced(5.0)
        return view

    yield make
    for informers in started:
        informers.stop()


def test_the_view_is_synced_once_every_resource_listed_and_a_missing_crd_counts_as_listed(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    api.absent.add(JOBSETS.path)
    states: dict[str, bool] = {}
    view = start(owners=(JOBS, JOBSETS), on_synced=states.__setitem__)
    assert view.synced
    assert states == {NODES.label: True, PODS.label: True, JOBS.label: True,
                      JOBSETS.label: True}
    assert view.lookup("jobset.x-k8s.io/v1alpha2", "JobSet", "ns", "x") is None
    assert ("get", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/x") not in gets(api)


def test_node_events_keep_the_capacity_current(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    api.seed(NODES.path, node("a"), node("b"))
    view = start()
    assert view.capacity.describe()["nodes"] == 2
    api.emit(NODES.path, "ADDED", node("c"))
    wait_for(lambda: view.capacity.describe()["nodes"] == 3, message="node c counted", timeout=5)
    api.emit(NODES.path, "DELETED", node("a"))
    wait_for(lambda: view.capacity.describe()["nodes"] == 2, message="node a forgotten", timeout=5)


def test_a_malformed_node_is_left_out_without_stopping_the_watch(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    view = start()
    broken = node("bad")
    broken["status"]["allocatable"]["nvidia.com/gpu"] = "lots"
    api.emit(NODES.path, "ADDED", broken)
    api.emit(NODES.path, "ADDED", node("good"))
    wait_for(lambda: view.capacity.describe()["nodes"] == 1,
             message="the good node counted", timeout=5)


def test_410_gone_relists_and_forgets_what_was_deleted_meanwhile(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    api.seed(NODES.path, node("a"), node("b"))
    view = start()
    api.forget(NODES.path, node("b"))  # deleted while our watch was not looking
    api.break_watch(NODES.path, {"type": "ERROR", "object": {"kind": "Status", "code": 410,
                                                         "message": "too old resource version"}})
    wait_for(lambda: view.capacity.describe()["nodes"] == 1,
             message="b forgotten after re-list", timeout=5)
    assert gets(api).count(("get", NODES.path)) == 2


def test_a_broken_connection_reconnects_and_lists_again(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    view = start()
    api.break_watch(NODES.path, OSError("connection reset by peer"))
    api.seed(NODES.path, node("late"))
    wait_for(lambda: view.capacity.describe()["nodes"] == 1,
             message="listed again after reconnect", timeout=5)
    api.emit(NODES.path, "ADDED", node("later"))
    wait_for(lambda: view.capacity.describe()["nodes"] == 2, message="watching again", timeout=5)


def test_bound_gpu_pods_are_counted_until_they_finish(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    api.seed(NODES.path, node("a"))
    view = start()
    api.emit(PODS.path, "ADDED", pod("p", "a", 4))
    api.emit(PODS.path, "ADDED", pod("cpu-only", "a", 0))
    wait_for(lambda: view.capacity.describe()["boundPods"] == 1,
             message="the GPU pod counted", timeout=5)
    api.emit(PODS.path, "MODIFIED", pod("p", "a", 4, phase="Succeeded"))
    wait_for(lambda: view.capacity.describe()["boundPods"] == 0,
             message="the finished pod released", timeout=5)


def test_owners_come_from_the_cache_and_a_miss_costs_one_get(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    api.seed(JOBS.path, job("cached"))
    view = start()
    found = view.lookup("batch/v1", "Job", "ns", "cached")
    assert found is not None and found["spec"] == {"parallelism": 2}
    assert "managedFields" not in found["metadata"], "managedFields are not kept in memory"
    gets_before = len(gets(api))
    assert view.lookup("batch/v1", "Job", "ns", "unknown") is None
    assert view.lookup("batch/v1", "Job", "ns", "unknown") is None
    assert gets(api)[gets_before:] == [("get", "/apis/batch/v1/namespaces/ns/jobs/unknown")]


def test_an_owner_created_a_moment_ago_is_fetched_on_a_miss(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    view = start()
    api.seed(JOBS.path, job("just-created"))  # in the API, not yet seen by our watch
    found = view.lookup("batch/v1", "Job", "ns", "just-created")
    assert found is not None and found["metadata"]["name"] == "just-created"
    api.emit(JOBS.path, "DELETED", job("just-created"))
    wait_for(lambda: view.lookup("batch/v1", "Job", "ns", "just-created") is None,
               message="deleted owner forgotten", timeout=5)


def test_the_cache_only_lookup_never_gets_and_says_when_a_get_could_help(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    api.seed(JOBS.path, job("cached"))
    view = start()
    api.seed(JOBS.path, job("just-created"))  # in the API, not yet seen by our watch
    found = view.cached("batch/v1", "Job", "ns", "cached")
    assert found is not None and found["metadata"]["name"] == "cached"
    gets_before = len(gets(api))
    with pytest.raises(OwnerNotCached, match="batch/Job/ns/just-created"):
        view.cached("batch/v1", "Job", "ns", "just-created")
    assert len(gets(api)) == gets_before, "the cache-only lookup sent a GET"
    # A kind nobody watches needs no GET either: not an owner of any gang.
    assert view.cached("apps/v1", "StatefulSet", "ns", "x") is None
    # After a miss the view knows for a while that a GET does not help.
    assert view.lookup("batch/v1", "Job", "ns", "unknown") is None
    assert view.cached("batch/v1", "Job", "ns", "unknown") is None


def test_a_relist_forgets_owners_deleted_meanwhile_and_keeps_the_others(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    api.seed(JOBS.path, job("kept"), job("gone"))
    view = start()
    api.forget(JOBS.path, job("gone"))
    api.break_watch(JOBS.path, {"type": "ERROR", "object": {"kind": "Status", "code": 410}})
    wait_for(lambda: gets(api).count(("get", JOBS.path)) == 2, message="listed again", timeout=5)
    wait_for(lambda: view.lookup("batch/v1", "Job", "ns", "gone") is None,
             message="gone forgotten", timeout=5)
    assert view.lookup("batch/v1", "Job", "ns", "kept") is not None


def _member(name: str, gang: str, *, kueue: bool = False) -> dict[str, Any]:
    member = pod(name, "", 3, phase="Pending")
    if kueue:
        member["metadata"]["labels"] = {"kueue.x-k8s.io/pod-group-name": gang}
    else:
        member["metadata"]["labels"] = {"gangkeeper.io/gang": gang}
        member["metadata"]["annotations"] = {"gangkeeper.io/gang-name": gang}
    return member


def test_gated_members_of_pod_based_gangs_are_cached_by_gang_name(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    """The siblings the webhook sums a pod-based gang over: gangkeeper's gang pods by
    their gang-name annotation, Kueue pod-group pods by their group label, picked
    from the one Pod watch; finished and deleted ones leave the cache."""
    api.seed(PODS.path, _member("a", "g"))
    view = start()
    assert [p["metadata"]["name"] for p in view.siblings("ns", "g")] == ["a"]
    api.emit(PODS.path, "ADDED", _member("b", "g"))
    api.emit(PODS.path, "ADDED", _member("k", "g", kueue=True))
    wait_for(lambda: len(view.siblings("ns", "g")) == 3, message="three members cached", timeout=5)
    done = _member("b", "g")
    done["status"]["phase"] = "Succeeded"
    api.emit(PODS.path, "MODIFIED", done)
    api.emit(PODS.path, "DELETED", _member("k", "g", kueue=True))
    wait_for(lambda: len(view.siblings("ns", "g")) == 1,
             message="finished and deleted gone", timeout=5)
    assert view.siblings("other", "g") == []
    assert [p for m, p, _ in api.calls if m == "WATCH"].count("/api/v1/pods") == 1


def test_a_cached_member_keeps_exactly_what_its_demand_and_placement_are_read_from(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    from gangkeeper.policies.podspec import placement_of, pod_demand

    member = _member("full", "g")
    member["spec"] = {
        "containers": [{"name": "c", "image": "big", "env": [{"name": "X", "value": "1"}],
                        "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
        "initContainers": [{"name": "side", "restartPolicy": "Always",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        "overhead": {"nvidia.com/gpu": "1"},
        "nodeSelector": {"pool": "a"},
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["z1"]}]}]}},
            "podAntiAffinity": {"x": 1}},
        "volumes": [{"name": "data", "emptyDir": {}}],
    }
    api.seed(PODS.path, member)
    view = start()
    [cached] = view.siblings("ns", "g")
    config = Config()
    assert pod_demand(cached["spec"], config) == pod_demand(member["spec"], config)
    assert placement_of(cached["spec"]) == placement_of(member["spec"])
    assert "volumes" not in cached["spec"] and "image" not in cached["spec"]["containers"][0]


def test_a_cached_member_keeps_its_uid_and_resource_version(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    """The policy remembers each sibling by (uid, resourceVersion); a member cached
    without its version was recognised again at every admission of its gang (a
    1,000-pod gang: 999 creates took 122 s)."""
    member = _member("versioned", "g")
    member["metadata"]["uid"] = "u-1"
    api.seed(PODS.path, member)  # the fake API server gives it a resourceVersion
    view = start()
    [cached] = view.siblings("ns", "g")
    first = cached["metadata"].get("resourceVersion")
    assert cached["metadata"]["uid"] == "u-1" and first
    api.emit(PODS.path, "MODIFIED", member)
    wait_for(
        lambda: view.siblings("ns", "g")[0]["metadata"].get("resourceVersion") != first,
        message="the new version cached", timeout=5,
    )
