"""The server's watch-fed cluster view: list, watch, re-list on 410, reconnect, owner misses.

The view's HTTP calls go through a `Transport`; here a scripted in-memory API stands
in for it, so the caching logic (what is counted, forgotten, fetched and when the view
says it is synced) is tested without timing games. The real API server is exercised by
the end-to-end tests (tests/e2e), which run `gangkeeper serve --kubeconfig`.
"""

from __future__ import annotations

import copy
import json
import queue
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from gangkeeper.policies.config import Config
from gangkeeper.webhook.server.cluster_view import (
    BOUND_PODS,
    NODES,
    ApiError,
    Resource,
    WatchClusterView,
)

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


class FakeApi:
    """Collections with a resourceVersion, watch streams fed by `emit`."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.streams: dict[str, queue.Queue[object]] = defaultdict(queue.Queue)
        self.absent: set[str] = set()
        self.calls: list[tuple[str, str]] = []
        self.rv = 1
        self.closed = False

    def seed(self, resource: Resource, *objects: dict[str, Any]) -> None:
        for obj in objects:
            self.objects[resource.path][self._name(obj)] = obj

    @staticmethod
    def _name(obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        return f"{meta.get('namespace', '')}/{meta['name']}"

    def emit(self, resource: Resource, kind: str, obj: dict[str, Any]) -> None:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        if kind == "DELETED":
            self.objects[resource.path].pop(self._name(obj), None)
        else:
            self.objects[resource.path][self._name(obj)] = obj
        self.streams[resource.path].put({"type": kind, "object": obj})

    def break_stream(self, resource: Resource, what: object) -> None:
        self.streams[resource.path].put(what)

    def get_json(self, path: str, query: Sequence[tuple[str, str]] = (), *,
                 timeout: float) -> Any:
        self.calls.append(("get", path))
        if "/namespaces/" in path:
            # A single object: /apis/batch/v1/namespaces/ns/jobs/name
            parts = path.split("/")
            namespace, name = parts[-3], parts[-1]
            base = "/".join(parts[:-4]) + "/" + parts[-2]
            found = self.objects.get(base, {}).get(f"{namespace}/{name}")
            if found is None:
                raise ApiError(404, "not found")
            return copy.deepcopy(found)
        if path in self.absent:
            raise ApiError(404, "the server could not find the requested resource")
        items = copy.deepcopy(list(self.objects[path].values()))
        return {"items": items, "metadata": {"resourceVersion": str(self.rv)}}

    def watch_lines(self, path: str, query: Sequence[tuple[str, str]], *,
                    timeout: float) -> Iterator[bytes]:
        self.calls.append(("watch", path))
        stream = self.streams[path]
        while not self.closed:
            try:
                item = stream.get(timeout=0.05)
            except queue.Empty:
                continue
            if isinstance(item, Exception):
                raise item
            yield json.dumps(item).encode()


def eventually(check: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


@pytest.fixture
def api() -> Iterator[FakeApi]:
    fake = FakeApi()
    yield fake
    fake.closed = True


@pytest.fixture
def start(api: FakeApi) -> Iterator[Callable[..., WatchClusterView]]:
    views: list[WatchClusterView] = []

    def make(owners: Sequence[Resource] = (JOBS,),
             on_synced: Callable[[str, bool], None] | None = None) -> WatchClusterView:
        view = WatchClusterView(None, Config(), owners=owners, on_synced=on_synced,
                                transport=api)  # type: ignore[arg-type]
        views.append(view)
        view.start()
        assert view.wait_synced(5.0)
        return view

    yield make
    for view in views:
        view.stop()


def test_the_view_is_synced_once_every_resource_listed_and_a_missing_crd_counts_as_listed(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    api.absent.add(JOBSETS.path)
    states: dict[str, bool] = {}
    view = start(owners=(JOBS, JOBSETS), on_synced=states.__setitem__)
    assert view.synced
    assert states == {NODES.label: True, BOUND_PODS.label: True, JOBS.label: True,
                      JOBSETS.label: True}
    assert view.lookup("jobset.x-k8s.io/v1alpha2", "JobSet", "ns", "x") is None
    assert ("get", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/x") not in api.calls


def test_node_events_keep_the_capacity_current(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    api.seed(NODES, node("a"), node("b"))
    view = start()
    assert view.capacity.describe()["nodes"] == 2
    api.emit(NODES, "ADDED", node("c"))
    eventually(lambda: view.capacity.describe()["nodes"] == 3, "node c counted")
    api.emit(NODES, "DELETED", node("a"))
    eventually(lambda: view.capacity.describe()["nodes"] == 2, "node a forgotten")


def test_a_malformed_node_is_left_out_without_stopping_the_watch(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    view = start()
    broken = node("bad")
    broken["status"]["allocatable"]["nvidia.com/gpu"] = "lots"
    api.emit(NODES, "ADDED", broken)
    api.emit(NODES, "ADDED", node("good"))
    eventually(lambda: view.capacity.describe()["nodes"] == 1, "the good node counted")


def test_410_gone_relists_and_forgets_what_was_deleted_meanwhile(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    api.seed(NODES, node("a"), node("b"))
    view = start()
    del api.objects[NODES.path]["/b"]  # deleted while our watch was not looking
    api.break_stream(NODES, {"type": "ERROR", "object": {"kind": "Status", "code": 410,
                                                         "message": "too old resource version"}})
    eventually(lambda: view.capacity.describe()["nodes"] == 1, "b forgotten after re-list")
    assert api.calls.count(("get", NODES.path)) == 2


def test_a_broken_connection_reconnects_and_lists_again(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    view = start()
    api.break_stream(NODES, OSError("connection reset by peer"))
    api.seed(NODES, node("late"))
    eventually(lambda: view.capacity.describe()["nodes"] == 1, "listed again after reconnect")
    api.emit(NODES, "ADDED", node("later"))
    eventually(lambda: view.capacity.describe()["nodes"] == 2, "watching again")


def test_bound_gpu_pods_are_counted_until_they_finish(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    api.seed(NODES, node("a"))
    view = start()
    api.emit(BOUND_PODS, "ADDED", pod("p", "a", 4))
    api.emit(BOUND_PODS, "ADDED", pod("cpu-only", "a", 0))
    eventually(lambda: view.capacity.describe()["boundPods"] == 1, "the GPU pod counted")
    api.emit(BOUND_PODS, "MODIFIED", pod("p", "a", 4, phase="Succeeded"))
    eventually(lambda: view.capacity.describe()["boundPods"] == 0, "the finished pod released")


def test_owners_come_from_the_cache_and_a_miss_costs_one_get(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    api.seed(JOBS, job("cached"))
    view = start()
    found = view.lookup("batch/v1", "Job", "ns", "cached")
    assert found is not None and found["spec"] == {"parallelism": 2}
    assert "managedFields" not in found["metadata"], "managedFields are not kept in memory"
    gets_before = len([c for c in api.calls if c[0] == "get"])
    assert view.lookup("batch/v1", "Job", "ns", "unknown") is None
    assert view.lookup("batch/v1", "Job", "ns", "unknown") is None
    gets = [c for c in api.calls if c[0] == "get"][gets_before:]
    assert gets == [("get", "/apis/batch/v1/namespaces/ns/jobs/unknown")]


def test_an_owner_created_a_moment_ago_is_fetched_on_a_miss(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    view = start()
    api.seed(JOBS, job("just-created"))  # in the API, not yet seen by our watch
    found = view.lookup("batch/v1", "Job", "ns", "just-created")
    assert found is not None and found["metadata"]["name"] == "just-created"
    api.emit(JOBS, "DELETED", job("just-created"))
    eventually(lambda: view.lookup("batch/v1", "Job", "ns", "just-created") is None,
               "deleted owner forgotten")


def test_a_relist_forgets_owners_deleted_meanwhile_and_keeps_the_others(
    api: FakeApi, start: Callable[..., WatchClusterView]
) -> None:
    api.seed(JOBS, job("kept"), job("gone"))
    view = start()
    del api.objects[JOBS.path]["ns/gone"]
    api.break_stream(JOBS, {"type": "ERROR", "object": {"kind": "Status", "code": 410}})
    eventually(lambda: api.calls.count(("get", JOBS.path)) == 2, "listed again")
    eventually(lambda: view.lookup("batch/v1", "Job", "ns", "gone") is None, "gone forgotten")
    assert view.lookup("batch/v1", "Job", "ns", "kept") is not None
